"""Reading and writing text files without losing bytes: encodings, line endings, modes."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

BOM = b"\xef\xbb\xbf"


class BinaryFileError(ValueError):
    """The file looks binary (it has a NUL byte near its start)."""


class NotRegularFileError(OSError):
    """The path is a FIFO, socket, device or folder: reading it could block or never end."""


class FileTooLargeError(OSError):
    """The file holds more than the caller's limit; nothing of it was kept."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words: "a directory", "a FIFO (named pipe)", ..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: Path | str, limit: int | None = None, allow_pipe: bool = False) -> bytes:
    """The bytes of a regular file; raises NotRegularFileError for anything else without blocking
    (the open is non-blocking, so a FIFO with no writer cannot hang the caller). With `limit`,
    at most that many bytes are read and a longer file raises FileTooLargeError (the size is
    checked as read, since /proc and /sys files report 0). `allow_pipe` also takes a FIFO or
    pipe (`<(command)` in bash is one) and waits for its writer, as any reader of a pipe does;
    devices, folders and sockets are still refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        pipe = allow_pipe and stat.S_ISFIFO(st.st_mode)
        if not stat.S_ISREG(st.st_mode) and not pipe:
            raise NotRegularFileError(f"{path} is {file_kind(st.st_mode)}, not a regular file")
        if pipe:  # a non-blocking reader sees EOF until a writer comes: open again, blocking
            again = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            os.close(fd)
            fd = again
            if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (st.st_dev, st.st_ino):
                raise NotRegularFileError(f"{path} changed while it was opened")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            if limit is None:
                return fh.read()
            data = fh.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise FileTooLargeError(f"{path} is larger than {limit:,} bytes")
    return data


def is_binary(data: bytes) -> bool:
    """Git's heuristic: a NUL byte in the first 8 KiB means binary."""
    return b"\x00" in data[:8192]


def decode(data: bytes) -> tuple[str, str]:
    """Decode losslessly: utf-8 (with or without BOM), else latin-1. Returns (text, encoding)."""
    if data.startswith(BOM):
        try:
            return data[3:].decode("utf-8"), "utf-8-sig"
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def encode(text: str, encoding: str) -> bytes:
    """Inverse of `decode`; raises UnicodeEncodeError if `text` does not fit the encoding."""
    if encoding == "utf-8-sig":
        return BOM + text.encode("utf-8")
    return text.encode(encoding)


def dominant_eol(text: str, default: str = "\n") -> str:
    """'\\r\\n' when most lines end with CRLF, else '\\n'."""
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    if crlf == 0 and lf == 0:
        return default
    return "\r\n" if crlf > lf else "\n"


def split_lines(text: str) -> list[str]:
    """Split on '\\n' only, keeping each line's terminator (str.splitlines splits on too much)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def body(line: str) -> str:
    """A line without its terminator (LF or CRLF)."""
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    return line


@dataclass
class TextFile:
    """A decoded text file and what is needed to write it back the same way."""
    text: str
    encoding: str
    eol: str
    mode: int | None


def load_text(path: Path) -> TextFile:
    """Read a text file; raises BinaryFileError for binary content, OSError as usual."""
    data = Path(path).read_bytes()
    if is_binary(data):
        raise BinaryFileError(f"{path} is a binary file")
    text, enc = decode(data)
    return TextFile(text, enc, dominant_eol(text), stat.S_IMODE(os.stat(path).st_mode))


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write via a temporary file in the same directory and rename it over `path`. The directory
    is opened once and both the temporary file and the rename go through that descriptor
    (tools/fsat.py), so the directory cannot be swapped between them. For files of the
    repository the tools use `fsat.write_atomic(root, rel, ...)`, which verifies every directory
    from the root down."""
    from . import fsat

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fsat.write_atomic(path.parent, path.name, data, mode)
    except ValueError as exc:  # a name fsat refuses (too long, "..", empty)
        raise OSError(f"cannot write {path}: {exc}") from None

