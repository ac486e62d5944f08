"""No file a sandboxed command writes keeps a set-user-id or set-group-id bit (docs/security.md,
"Set-id files"). Standard library only; also run as a script (see `main`).

Dropping capabilities does not stop root from making a root-owned set-id program
(`cp /bin/sh x && chmod 4755 x`), and whoever runs it later outside the sandbox would be root.
Two layers:

1. A seccomp filter, handed to bubblewrap (`--seccomp FD`), makes every call that could set the
   bits fail with EPERM: chmod, fchmod, fchmodat, fchmodat2, and open, openat, creat, mknod,
   mknodat with a mode holding S_ISUID or S_ISGID; openat2 (its mode lies behind a pointer the
   filter cannot read) answers ENOSYS, so libc falls back to openat; io_uring (which would bypass
   the filter) and foreign system-call ABIs (32-bit, x32) are refused. So `chmod u+s`, `install
   -m 4755`, `tar -p`, `cp -p` of a set-id file and Python's `os.chmod` all fail, and no set-id
   file exists even while the command runs. The filter is built for x86_64 and aarch64; on any
   other machine there is none and the second layer alone holds.
2. Where no filter was in force (no bubblewrap, or a machine without one), every regular file
   under the writable folders whose status changed since the command started (ctime, which no
   command can set back) loses the bits afterwards (`clear_setid`). Inside bubblewrap every bind
   is mounted nosuid and the command runs with no_new_privs, so a set-id file never runs with
   privileges there; the scan is what keeps one from persisting outside. With the filter the
   scan is skipped: it would find nothing, and it costs a stat per file (about 0.5 s for 50,000
   files) after every command.

Script form (`clover fix`'s tests, `clover swebench evaluate`: programs Clover runs itself):

    python -I -S setid.py FOLDER... -- ARGV...

runs ARGV (a bubblewrap command line) with the filter passed on a pipe in place of the word
SECCOMP_FD_WORD (the word and the `--seccomp` before it are dropped when there is no filter),
forwards SIGTERM/SIGINT/SIGHUP to it, then, unless the filter was passed, clears set-id bits
under the FOLDERs; it exits with ARGV's status.
"""
from __future__ import annotations

import os
import platform
import signal
import stat
import struct
import subprocess
import sys
import time

SECCOMP_FD_WORD = "@CLOVER_SECCOMP_FD@"
SETID = stat.S_ISUID | stat.S_ISGID
EPERM, ENOSYS = 1, 38
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_ABS_W, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
X32_BIT = 0x40000000
# (AUDIT_ARCH, {syscall: index of its mode argument}, {syscall: errno to answer}, foreign-ABI bit)
ARCHES = {
    "x86_64": (0xC000003E, {90: 1, 91: 1, 268: 2, 452: 2, 2: 2, 85: 1, 257: 3, 133: 1, 259: 2},
               {437: ENOSYS, 425: EPERM}, X32_BIT),
    "aarch64": (0xC00000B7, {52: 1, 53: 2, 452: 2, 56: 3, 33: 2}, {437: ENOSYS, 425: EPERM}, 0),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The seccomp BPF program (struct sock_filter[], native byte order) that refuses set-id
    modes, for this machine's architecture; None where none is known."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, modes, refused, foreign = arch
    deny = RET_ERRNO | EPERM
    prog = [_insn(LD_ABS_W, 0, 0, 4), _insn(JEQ_K, 1, 0, audit), _insn(RET_K, 0, 0, deny),
            _insn(LD_ABS_W, 0, 0, 0)]
    if foreign:
        prog += [_insn(JGE_K, 0, 1, foreign), _insn(RET_K, 0, 0, deny)]
    for nr, errno in refused.items():
        prog += [_insn(JEQ_K, 0, 1, nr), _insn(RET_K, 0, 0, RET_ERRNO | errno)]
    for nr, arg in modes.items():
        prog += [_insn(JEQ_K, 0, 4, nr), _insn(LD_ABS_W, 0, 0, 16 + 8 * arg),
                 _insn(JSET_K, 0, 1, SETID), _insn(RET_K, 0, 0, deny), _insn(RET_K, 0, 0, RET_ALLOW)]
    return b"".join(prog + [_insn(RET_K, 0, 0, RET_ALLOW)])


def filter_fd() -> int | None:
    """The read end of a pipe holding the filter (bubblewrap's `--seccomp FD`); None when there
    is no filter for this machine. The caller passes it to bwrap and closes it."""
    prog = filter_program()
    if prog is None:
        return None
    r, w = os.pipe()
    try:
        os.write(w, prog)  # a few hundred bytes: the pipe holds them
    finally:
        os.close(w)
    return r


def with_filter(argv: list[str], fd: int | None) -> list[str]:
    """`argv` with SECCOMP_FD_WORD replaced by `fd`, or the `--seccomp WORD` pair dropped."""
    if SECCOMP_FD_WORD not in argv:
        return list(argv)
    i = argv.index(SECCOMP_FD_WORD)
    if fd is None:
        return argv[:i - 1] + argv[i + 1:]
    return argv[:i] + [str(fd)] + argv[i + 1:]


def _clear(path: str) -> bool:
    """Drop the set-id bits of the regular file at `path` (never through a symlink)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & SETID:
            return False
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~SETID)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def clear_setid(folders, since: float) -> list[str]:
    """Every regular file under `folders` (symlinks not followed, `.git` folders skipped: they
    are read-only in the sandbox) with a set-id bit and a status change at or after `since`
    (time.time()) loses the bits; returns their paths."""
    cleared, todo = [], [os.fspath(f) for f in folders]
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git":
                        todo.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_mode & SETID and stat.S_ISREG(st.st_mode) and st.st_ctime >= since - 1.0 \
                    and _clear(entry.path):
                cleared.append(entry.path)
    return cleared


def _die_with_parent() -> None:
    """In the child: SIGKILL when this guard dies (a caller's timeout kills the guard)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    """Script form: FOLDER... -- ARGV... (see the module docstring)."""
    split = argv.index("--")
    folders, command = argv[1:split], argv[split + 1:]
    since = time.time()
    fd = filter_fd()
    try:
        child = subprocess.Popen(with_filter(command, fd), pass_fds=(fd,) if fd is not None else (),
                                 preexec_fn=_die_with_parent)
    finally:
        if fd is not None:
            os.close(fd)

    def forward(signum, frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = child.wait()
    if fd is None or SECCOMP_FD_WORD not in command:  # no filter was in force
        clear_setid(folders, since)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
