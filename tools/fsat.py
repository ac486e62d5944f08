"""File operations relative to a verified directory descriptor (the `openat` family).

A path checked with `resolve_in_root` and then opened by name can be redirected between the check
and the open: swap `sub/` for a symlink to `/tmp` and `sub/f.txt` lands outside the repository.
Here every write starts from a descriptor of the (resolved) root and walks the path one component
at a time with `O_NOFOLLOW | O_DIRECTORY`, so a directory that is (or becomes) a symlink stops the
walk with UnsafePathError instead of being followed; the final name is created, renamed, linked
or removed with `dir_fd=` that descriptor (docs/tools.md, "Path safety").

`rel` is always a repository-relative POSIX path without `.`/`..` parts (what `relpath` returns).
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

NAME_MAX = 255
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


class UnsafePathError(OSError):
    """A directory on the way is a symlink or not a directory (it may have been swapped)."""


def split_rel(rel: str) -> list[str]:
    """The components of a repository-relative path; ValueError for anything else."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or rel.startswith("/"):
        raise ValueError(f"not a repository-relative path: {rel!r}")
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise ValueError(f"not a plain repository-relative path: {rel!r}")
        if len(os.fsencode(part)) > NAME_MAX:
            raise ValueError(f"a file name in {rel!r} is longer than {NAME_MAX} bytes")
    return parts


def _open_dir(name: str, dir_fd: int, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = True
        if is_link:  # ELOOP: followed nowhere, refused
            raise UnsafePathError(errno.ELOOP, f"{shown} is a symlink, not a directory inside "
                                               "the repository (was it swapped?)") from None
        raise UnsafePathError(errno.ENOTDIR, f"{shown} is a file, not a directory") from None


@contextmanager
def parent_dir(root: Path | str, rel: str, create: bool = False) -> Iterator[tuple[int, str]]:
    """(descriptor of the directory holding `rel`, final name); creates missing directories
    (mode 0777 minus umask) when `create`. FileNotFoundError when a directory is missing."""
    parts = split_rel(rel)
    fd = os.open(os.fspath(root), os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for i, part in enumerate(parts[:-1]):
            shown = "/".join(parts[: i + 1])
            try:
                nfd = _open_dir(part, fd, shown)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = _open_dir(part, fd, shown)
            os.close(fd)
            fd = nfd
        yield fd, parts[-1]
    finally:
        os.close(fd)


@dataclass
class Probe:
    """What is at a path now: kind "absent", "file", "link", "dir" or "other" (FIFO, device...)."""
    kind: str
    data: bytes | None = None
    mode: int | None = None
    link: str | None = None


def probe(root: Path | str, rel: str, read: bool = True) -> Probe:
    """Look at `rel` without following any symlink; a missing directory (or a file where a
    directory would be) means "absent". UnsafePathError when a directory on the way is a link."""
    try:
        with parent_dir(root, rel) as (fd, name):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                return Probe("absent")
            if stat.S_ISLNK(st.st_mode):
                return Probe("link", link=os.readlink(name, dir_fd=fd))
            if stat.S_ISDIR(st.st_mode):
                return Probe("dir")
            if not stat.S_ISREG(st.st_mode):
                return Probe("other")
            data = _read_at(fd, name) if read else None
            return Probe("file", data, stat.S_IMODE(st.st_mode))
    except FileNotFoundError:
        return Probe("absent")
    except UnsafePathError as exc:
        if _missing_under_file(exc):
            return Probe("absent")
        raise


def _missing_under_file(exc: UnsafePathError) -> bool:
    """A regular file where a directory would be: the path cannot exist (not an escape)."""
    return exc.errno == errno.ENOTDIR


def _read_at(fd: int, name: str) -> bytes:
    ffd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=fd)
    with os.fdopen(ffd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(ffd).st_mode):
            raise UnsafePathError(errno.EINVAL, f"{name} is not a regular file")
        os.set_blocking(ffd, True)
        return fh.read()


def _tmp_name() -> str:
    return f".clover-{secrets.token_hex(6)}.tmp"


def write_atomic(root: Path | str, rel: str, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `rel` via a temporary file in the same (verified) directory, fsync it and
    rename it over the name. `mode` None keeps an existing file's mode, else 0666 minus umask."""
    with parent_dir(root, rel, create=True) as (dfd, name):
        if mode is None:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else default_mode()
            except FileNotFoundError:
                mode = default_mode()
        tmp = _tmp_name()
        ffd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC,
                      0o600, dir_fd=dfd)
        try:
            with os.fdopen(ffd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())  # never expose a renamed file whose bytes are not on disk
                os.fchmod(fh.fileno(), mode)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise


def write_link(root: Path | str, rel: str, target: str) -> None:
    """Create (or atomically replace) the symlink `rel` -> `target`."""
    with parent_dir(root, rel, create=True) as (dfd, name):
        tmp = _tmp_name()
        os.symlink(target, tmp, dir_fd=dfd)
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise


def remove(root: Path | str, rel: str) -> None:
    """Remove the file or symlink `rel` (a link itself, never its target); absent is fine."""
    try:
        with parent_dir(root, rel) as (dfd, name):
            try:
                os.unlink(name, dir_fd=dfd)
            except (FileNotFoundError, NotADirectoryError):
                pass
    except FileNotFoundError:
        pass
    except UnsafePathError as exc:
        if not _missing_under_file(exc):
            raise


def remove_empty_dirs(root: Path | str, rel_dir: str, top: str) -> None:
    """rmdir `rel_dir` and its parents up to and including `top` while they are empty."""
    parts = split_rel(rel_dir)
    stop = len(split_rel(top))
    while len(parts) >= max(stop, 1):
        try:
            with parent_dir(root, "/".join(parts)) as (dfd, name):
                os.rmdir(name, dir_fd=dfd)
        except OSError:
            return
        parts = parts[:-1]


def default_mode() -> int:
    """0o666 minus the process umask (read from /proc when possible: os.umask is not thread-safe)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask
