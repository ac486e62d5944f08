"""run_shell: a command in the repository root, in its own process group, with no stdin.

The command runs in the OS sandbox its approval mode asks for (tools/sandbox.py; docs/security.md).
Nothing it starts outlives the call: inside bubblewrap the whole pid namespace dies with it;
without a sandbox a subreaper wrapper (tools/reaper.py) keeps even setsid/setpgrp children in
reach. On timeout or cancellation everything is killed; when the command exits, whatever it left
running is killed after a short grace. The timeout is capped by the user's limit. Output goes to
a bounded buffer (the first and last 64 KiB, with the omitted amount reported), so a command
that prints gigabytes costs no memory; the exit code is part of the result.
"""
from __future__ import annotations

import codecs
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from . import githarden, sandbox, setid
from .base import ToolResult

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0     # the cap on any timeout when the user set no limit (CLOVER_SHELL_MAX_TIMEOUT)
HEAD_BYTES = 64 * 1024  # the result keeps the first and the last 64 KiB of the output
TAIL_BYTES = 64 * 1024
LIVE_BYTES = 256 * 1024  # output streamed live to the caller, at most
REAPER = Path(__file__).resolve().with_name("reaper.py")
GRACE_AFTER_EXIT = 0.5  # seconds a finished command's background children may keep the pipe
EXIT_POLL_SECONDS = 0.02  # with a cancel event: how soon a command's exit is noticed


class CappedOutput:
    """Keep the first `head` and the last `tail` bytes of a stream and count what falls between.

    Memory stays bounded whatever the command prints (a 500 MB log costs head + 2 x tail)."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES):
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail = bytearray(), bytearray()
        self.elided_bytes = self.elided_lines = 0

    def add(self, data: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            self.elided_bytes += excess
            self.elided_lines += self.tail.count(b"\n", 0, excess)
            del self.tail[:excess]

    def render(self) -> str:
        head = codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(self.head))
        if not self.elided_bytes:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        tail = bytes(self.tail)
        while tail and (tail[0] & 0xC0) == 0x80:  # do not start inside a UTF-8 character
            tail = tail[1:]
        note = f"\n[... {self.elided_bytes} bytes ({self.elided_lines} lines) omitted ...]\n"
        return head + note + tail.decode("utf-8", "replace")


def _kill_group(pgid: int, proc: subprocess.Popen, term_wait: float = 1.0) -> None:
    """SIGTERM the whole process group, then SIGKILL whatever is left after `term_wait` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + (term_wait if sig == signal.SIGTERM else 1.0)
        delay = 0.002  # most groups are gone within a few ms of the signal: look soon, then less often
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, or its zombie keeps the group alive
            if not _group_alive(pgid):
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group (zombies wait for their reaper)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat_line.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _wait(proc: subprocess.Popen, limit: float, cancel: threading.Event | None) -> str:
    """Wait for the command: "exited", "timeout" or "cancelled". A cancel is seen the moment it
    is set (the wait is on the event); an exit within EXIT_POLL_SECONDS."""
    deadline = time.monotonic() + limit
    while True:
        if proc.poll() is not None:
            return "exited"
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        if cancel is None:
            try:
                proc.wait(timeout=left)
                return "exited"
            except subprocess.TimeoutExpired:
                return "timeout"
        if cancel.wait(min(left, EXIT_POLL_SECONDS)):
            return "cancelled"


def max_timeout_default() -> float:
    """The longest timeout a command may get when the user set no limit: CLOVER_SHELL_MAX_TIMEOUT
    seconds (default 600)."""
    try:
        value = float(os.environ.get("CLOVER_SHELL_MAX_TIMEOUT", ""))
    except ValueError:
        return MAX_TIMEOUT
    return value if math.isfinite(value) and value > 0 else MAX_TIMEOUT


def _limit(timeout, max_timeout) -> tuple[float | None, str]:
    """(seconds, note) for the call's timeout, capped by the user's limit; (None, error) when bad."""
    cap = max_timeout_default()
    try:
        if max_timeout is not None and math.isfinite(float(max_timeout)) and float(max_timeout) > 0:
            cap = float(max_timeout)
    except (TypeError, ValueError, OverflowError):
        pass
    if timeout is None:
        return min(DEFAULT_TIMEOUT, cap), ""
    try:
        value = float(timeout)
    except (TypeError, ValueError, OverflowError):
        return None, f"timeout must be a number of seconds, got {str(timeout)[:40]!r}"
    if math.isnan(value) or value <= 0:
        return None, f"timeout must be a positive number of seconds (at most {cap:g}), got {value:g}"
    if value > cap:
        return cap, f"[timeout {value:g} s capped to the limit of {cap:g} s]"
    return value, ""


def _spawn(root: Path, command: str, profile: str, env: dict[str, str]):
    """(Popen, status read fd or None): bwrap when the profile sandboxes and bwrap works, else
    the subreaper wrapper (tools/reaper.py)."""
    inner = ["bash", "-c", command]
    common = dict(cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.STDOUT, start_new_session=True)
    if profile != "off" and sandbox.status().available:
        fd = setid.filter_fd()  # set-id modes refused inside (tools/setid.py)
        try:
            argv = setid.with_filter(sandbox.bwrap_argv(root, profile, inner, seccomp=True), fd)
            return subprocess.Popen(argv, pass_fds=(fd,) if fd is not None else (), **common), None
        finally:
            if fd is not None:
                os.close(fd)
    if not sys.platform.startswith("linux"):  # no subreaper there: the process group only
        return subprocess.Popen(inner, **common), None
    r, w = os.pipe()
    try:
        argv = [sys.executable, "-I", "-S", str(REAPER), str(w), str(GRACE_AFTER_EXIT), str(os.getpid()),
                "--", *inner]
        return subprocess.Popen(argv, pass_fds=(w,), **common), r
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)


def run_shell(root: Path, command: str, timeout: float | None = None,
              on_output: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None, max_timeout: float | None = None,
              sandbox_profile: str | None = None) -> ToolResult:
    """Run `command` with bash in `root`; returns its capped output and exit code.

    `timeout` (the model's, or the caller's default) is capped by `max_timeout` (the user's
    limit; CLOVER_SHELL_MAX_TIMEOUT or 600 s when None). The command runs in the sandbox the
    root's profile asks for (`sandbox_profile` overrides it; see tools/sandbox.py). When `cancel`
    is set while the command runs, everything it started is killed at once and the result is
    ok=False with details["cancelled"] = True.
    """
    if not command or not command.strip():
        return ToolResult(False, "empty command", {"error": "bad_arguments"})
    limit, limit_note = _limit(timeout, max_timeout)
    if limit is None:
        return ToolResult(False, limit_note, {"error": "bad_arguments"})
    root = Path(root)
    profile = sandbox_profile if sandbox_profile in sandbox.PROFILES else sandbox.profile_for(root)
    st = sandbox.status()
    if profile != "off" and not st.available and sandbox.forced() == "bwrap":
        return ToolResult(False, f"CLOVER_SANDBOX=bwrap, but {st.reason}; the command was not run",
                          {"error": "sandbox"})
    notice = sandbox.take_notice(profile)
    try:
        env = sandbox.command_env({**os.environ, "GIT_TERMINAL_PROMPT": "0", "PAGER": "cat",
                                   "GIT_PAGER": "cat", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}, profile, root)
    except githarden.HardeningError as exc:  # fails closed: no command without the git hardening
        return ToolResult(False, f"{exc}; the command was not run", {"error": "git_hardening"})
    started, wall_start = time.monotonic(), time.time()
    try:
        had_git = os.path.lexists(root / ".git")
        proc, status_fd = _spawn(root, command, profile, env)
    except OSError as exc:
        return ToolResult(False, f"could not start the command: {exc}", {"error": "spawn"})
    captured = CappedOutput()
    reader = _start_reader(proc, captured, _LiveStream(on_output))
    outcome = _wait(proc, limit, cancel)
    killed_background = _stop(proc, outcome, status_fd, reader)
    elapsed = time.monotonic() - started
    code = proc.returncode
    timed_out, cancelled = outcome == "timeout", outcome == "cancelled"
    notes = [limit_note] if limit_note else []
    if not had_git and profile != "off" and st.available:
        notes.append(_quarantine_new_git(root))
    if profile == "workspace" and not (st.available and setid.filter_program() is not None):
        # no seccomp filter refused the bits (no bwrap, or a machine without a filter): clear them
        notes.append(_setid_note(sandbox.clear_setid(root, wall_start), root))
    notes = [n for n in notes if n] + _ending_notes(code, outcome, limit, killed_background)
    text = captured.render()
    output = (notice + "\n" if notice else "") + (text.rstrip("\n") + "\n" if text.strip() else "") + "\n".join(notes)
    details = {"exit_code": code, "timed_out": timed_out, "seconds": round(elapsed, 3),
               "timeout": limit, "elided_bytes": captured.elided_bytes,
               "elided_lines": captured.elided_lines,
               "sandbox": f"bwrap:{profile}" if profile != "off" and st.available else "none"}
    if cancelled:
        details["cancelled"] = True
    return ToolResult(code == 0 and not (timed_out or cancelled), output, details)


def _start_reader(proc, captured: CappedOutput, live: "_LiveStream") -> threading.Thread:
    """A thread copying the command's output into `captured` and the live stream until EOF."""
    def pump() -> None:
        fd = proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            captured.add(chunk)
            live.add(chunk)
        live.finish()

    reader = threading.Thread(target=pump, name="run_shell-reader", daemon=True)
    reader.start()
    return reader


def _stop(proc, outcome: str, status_fd: int | None, reader: threading.Thread) -> bool:
    """End everything the command started (its process group, and through the subreaper what
    left the group) once it exited, timed out or was cancelled; returns whether background
    processes it left running were stopped."""
    pgid = proc.pid  # start_new_session: the child leads its own group
    cancelled = outcome == "cancelled"
    if outcome != "exited":
        # the subreaper needs time to kill what left the group (it escalates to SIGKILL itself);
        # SIGKILLed early, it would leave those orphans behind. Normally it is done in ~0.25 s.
        wait = (1.5 if cancelled else 3.0) if status_fd is not None else (0.2 if cancelled else 1.0)
        _kill_group(pgid, proc, term_wait=wait)
        proc.wait()
    killed_background = False
    if status_fd is not None:
        try:
            killed_background = os.read(status_fd, 16) == b"B"
        except OSError:
            pass
        os.close(status_fd)
    if outcome == "exited":
        reader.join(timeout=GRACE_AFTER_EXIT)
        # whatever the command left running in its group (also children that redirected
        # their output away from our pipe) does not outlive the call
        if _group_alive(pgid):
            killed_background = True
            _kill_group(pgid, proc)
    reader.join(timeout=2.0)
    proc.stdout.close()
    return killed_background


def _ending_notes(code: int | None, outcome: str, limit: float, killed_background: bool) -> list[str]:
    """The lines under the output that say how the command ended."""
    notes = []
    if outcome == "cancelled":
        notes.append("[cancelled by the user; the command and its children were killed]")
    elif outcome == "timeout":
        notes.append(f"[timed out after {limit:g} s; the command and its children were killed]")
    elif killed_background:
        notes.append("[background processes left running by the command were stopped]")
    if code is not None and code < 0 and outcome == "exited":
        notes.append(f"[killed by signal {-code}]")
    return notes + [f"[exit code {code}]"]


def _quarantine_new_git(root: Path) -> str:
    """A `.git` that a sandboxed command created at the root is moved aside: Clover's own git,
    which runs outside the sandbox, would otherwise obey its config (filters, hooks). Returns
    the note for the result ("" when there was none)."""
    git = root / ".git"
    if not os.path.lexists(git):
        return ""
    aside = root / f".git.sandbox-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        os.rename(git, aside)
    except OSError as exc:
        return f"[the command created .git, and it could not be moved aside ({exc}); do not trust it]"
    return (f"[the command created .git; a repository made inside the sandbox is not used, so it was "
            f"moved to {aside.name} (run `git init` yourself if you want one)]")


def _setid_note(cleared: list[str], root: Path) -> str:
    """The result's note naming the files whose set-id bits were cleared ("" for none)."""
    if not cleared:
        return ""
    names = ", ".join(os.path.relpath(p, os.path.realpath(root)) for p in cleared[:5])
    more = f" and {len(cleared) - 5} more" if len(cleared) > 5 else ""
    return f"[set-id bits cleared on {names}{more}: a command may not leave set-id programs]"


class _LiveStream:
    """Forwards decoded output to `on_output` up to LIVE_BYTES, then one note and nothing more
    (the consumer keeps what it is given; the result keeps the head and tail)."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.on_output, self.sent = on_output, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def _emit(self, text: str) -> None:
        if text and self.on_output is not None:
            try:
                self.on_output(text)
            except Exception:  # a consumer's bug must not kill the command's reader
                pass

    def add(self, chunk: bytes) -> None:
        if self.on_output is None or self.sent >= LIVE_BYTES:
            return
        room = LIVE_BYTES - self.sent
        self.sent += len(chunk)
        self._emit(self.decoder.decode(chunk[:room]))
        if self.sent >= LIVE_BYTES:
            self._emit(f"\n[... live output stopped after {LIVE_BYTES // 1024} KiB; "
                       f"the result keeps the first and last {HEAD_BYTES // 1024} KiB ...]\n")

    def finish(self) -> None:
        if self.sent < LIVE_BYTES:
            self._emit(self.decoder.decode(b"", final=True))
