"""The repository edit lock: one writer at a time per repository, across processes.

Two `clover run` processes editing one repository would otherwise read, change and write the same
file at once and lose each other's edits (docs/tools.md, "Checkpoints and undo"). Every writing
tool call holds this lock from the moment it reads the files it will change until its checkpoint
is finished; `undo` holds it too. The lock is `fcntl.flock` on `edit.lock` in the repository's
state folder (tools/statedir.py), so the kernel drops it when a process dies, and it is reentrant
inside one process (a thread lock per root counts the nesting).

A second process waits up to `CLOVER_LOCK_TIMEOUT` seconds (default 30) and then gets a clear
LockTimeout naming the pid that holds the lock; a wait longer than a moment is reported back.

Kept rather than `filelock` (not a dependency of ours): the flock itself is a few lines, and what
we need around it (the holder's pid in the error, the wait reported to the model, one lock per
real path) filelock does not give.
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .statedir import repo_state_dir

DEFAULT_TIMEOUT = 30.0
LOCK_FILE = "edit.lock"


class LockError(OSError):
    """The edit lock could not be taken; str() is one line for the model and the user."""


class LockTimeout(LockError):
    """Another process held the repository's edit lock for longer than the timeout."""


class _RootLock:
    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd = -1


_LOCKS: dict[str, _RootLock] = {}
_GUARD = threading.Lock()


def lock_timeout() -> float:
    """`CLOVER_LOCK_TIMEOUT` (seconds, >= 0) or the default 30."""
    try:
        value = float(os.environ.get("CLOVER_LOCK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 <= value < 1e6 else DEFAULT_TIMEOUT


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


class EditLock:
    """What `repo_lock` yields: how long this acquisition waited for another process."""

    def __init__(self) -> None:
        self.waited = 0.0

    def notice(self) -> str:
        """A sentence for the tool result when the wait was noticeable, else ""."""
        if self.waited < 0.5:
            return ""
        return (f"(Waited {self.waited:.1f} s for another Clover process that was editing this "
                "repository.) ")


@contextmanager
def repo_lock(root: Path | str, timeout: float | None = None) -> Iterator[EditLock]:
    """Hold the edit lock of the repository at `root`; raises LockTimeout after `timeout`."""
    timeout = lock_timeout() if timeout is None else timeout
    key = os.path.realpath(os.fspath(root))
    with _GUARD:
        entry = _LOCKS.setdefault(key, _RootLock())
    info = EditLock()
    start = time.monotonic()
    if not entry.thread_lock.acquire(timeout=timeout if timeout > 0 else -1):
        raise LockTimeout(f"another task in this process kept the edit lock of {key} for "
                          f"{timeout:.0f} s; nothing was changed")
    try:
        if entry.depth == 0:
            entry.fd = _acquire(key, start, timeout)
        entry.depth += 1
        info.waited = time.monotonic() - start
        try:
            yield info
        finally:
            entry.depth -= 1
            if entry.depth == 0:
                try:
                    fcntl.flock(entry.fd, fcntl.LOCK_UN)
                finally:
                    os.close(entry.fd)
                    entry.fd = -1
    finally:
        entry.thread_lock.release()


def _acquire(key: str, start: float, timeout: float) -> int:
    try:
        path = repo_state_dir(key) / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise LockError(f"cannot open the edit lock of {key} in Clover's state folder "
                        f"({exc.strerror or exc}); nothing was changed") from None
    try:
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start >= timeout:
                    raise LockTimeout(
                        f"another Clover process{_holder(fd)} has been editing {key} for over "
                        f"{timeout:.0f} s; nothing was changed. Try again when it has finished."
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise
