"""A tiny process that runs one command as a child subreaper (run as a script, standard library only).

    python -I -S reaper.py STATUS_FD GRACE PARENT -- COMMAND...   (STATUS_FD -1: none)

Linux hands every orphaned descendant of a subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) to it
instead of to init, so children that leave the process group with setsid/setpgrp still stay in
reach. When the command exits, descendants get GRACE seconds to finish, then all are killed (and
b"B" is written to STATUS_FD); on SIGTERM/SIGINT/SIGHUP (a timeout or a cancel in run_shell) every
descendant is killed at once. When PARENT (Clover) dies, however it dies (SIGKILL too), the kernel
sends the reaper SIGTERM (`PR_SET_PDEATHSIG`) and it kills every descendant the same way, so no
command outlives Clover. The exit status is the command's (a signal is re-raised).
Used by tools/shell.py when no bubblewrap sandbox runs the command (docs/security.md), and around
every stdio MCP server (clover_cli/agent/mcp/hub.py), with stdin and stdout passed through.
"""
import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class _Stop(Exception):
    pass


def _stop(signum, frame):
    raise _Stop()


def descendants(me: int) -> list[int]:
    """Live (non-zombie) descendants of `me`, read from /proc."""
    kids: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) >= 2:
            kids.setdefault(int(fields[1]), []).append((int(name), fields[0].decode()))
    out, todo = [], [me]
    while todo:
        for pid, state in kids.get(todo.pop(), []):
            todo.append(pid)
            if state != "Z":
                out.append(pid)
    return out


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(term_wait: float) -> bool:
    """SIGTERM every descendant, SIGKILL what is left after `term_wait` s; True if any existed."""
    me, any_found = os.getpid(), False
    for sig, wait in ((signal.SIGTERM, term_wait), (signal.SIGKILL, 2.0)):
        pids = descendants(me)
        if not pids:
            return any_found
        any_found = True
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
            reap()
            pids = descendants(me) if sig == signal.SIGKILL else [p for p in descendants(me) if p in pids]
    reap()
    return any_found


def main(argv: list[str]) -> int:
    status_fd, grace, parent, command = int(argv[1]), float(argv[2]), int(argv[3]), argv[5:]
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: run the command plainly
        os.execvp(command[0], command)
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # Clover died before the line above: nothing to run for
        return 128 + signal.SIGTERM
    child = os.fork()
    if child == 0:
        try:
            if status_fd >= 0:
                os.close(status_fd)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    status = None
    try:
        while status is None:
            pid, st = os.waitpid(-1, 0)
            if pid == child:
                status = st
        deadline = time.monotonic() + grace
        while descendants(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.02)
            reap()
        if kill_all(0.2) and status_fd >= 0:
            os.write(status_fd, b"B")
    except _Stop:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        kill_all(0.2)
        return 128 + signal.SIGTERM
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status) if status is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
