"""grep's Python engine (docs/tools.md, "grep"): the regex runs on the PyPI `regex` module in a
worker process (tools/grepworker.py) that the caller kills at the wall-clock deadline, so a
catastrophically backtracking pattern (`(a|aa)+b`) ends in a clear error instead of holding the
process; every file is decoded the way read_file shows it (textio.decode: utf-8, else latin-1; over
read_file's COUNT_LIMIT_BYTES, utf-8 with replacement, as read_file streams them); files over
MAX_FILE_BYTES are searched line by line as they stream, and the few too big even for that are
named in the answer, never skipped in silence."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import regex

from .files import regular_inside
from .read_file import COUNT_LIMIT_BYTES
from .textio import BOM, decode, is_binary, read_regular

GREP_SECONDS = 10.0            # one grep call, by the wall clock (grepworker.py kills the search then)
MAX_FILE_BYTES = 5_000_000     # read whole up to this; streamed line by line above
MAX_STREAM_BYTES = 1_000_000_000  # not searched at all above this (named in the answer)
MAX_MATCHES = 200
BATCH_CHARS = 1 << 20


class GrepTimeout(Exception):
    """The search ran past its deadline."""


@dataclass
class Found:
    matches: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line number, text)
    total: int = 0
    nfiles: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    timed_out: bool = False


def compile_pattern(pattern: str, ignore_case: bool) -> regex.Pattern:
    """The compiled pattern; raises regex.error for one that cannot be compiled."""
    return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)


class Deadline:
    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = GREP_SECONDS if seconds is None else seconds
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise GrepTimeout()
        return left


def search(rx: regex.Pattern, text: str, deadline: Deadline | None) -> bool:
    try:
        timeout = None if deadline is None else deadline.left()
        return rx.search(text, timeout=timeout, concurrent=True) is not None
    except TimeoutError:
        raise GrepTimeout() from None


def search_files(root: Path, rels: Iterable[str], rx: regex.Pattern, deadline: Deadline) -> Found:
    """Every matching line of the files `rels` (repository-relative, under the resolved `root`),
    searched in the worker process; at the deadline the worker is killed and what it had found
    comes back with `timed_out`."""
    from . import grepworker

    return grepworker.search(root, list(rels), rx, deadline)


def scan(root: Path, rels: Iterable[str], rx: regex.Pattern, deadline: Deadline | None,
         room: int = MAX_MATCHES) -> Iterator[dict[str, Any]]:
    """One record a file that matched or was not searched: {"rel", "count", "kept": [[line, text]]}
    or {"rel", "skipped": why}. Raises GrepTimeout past `deadline` (None: the caller's to enforce)."""
    base = str(root)
    for rel in rels:
        full = root / rel
        if not regular_inside(base, str(full)):  # symlinks out of the root, FIFOs, devices
            continue
        try:
            size = full.stat().st_size
            if size > MAX_STREAM_BYTES:
                yield {"rel": rel, "skipped": f"{size:,} bytes"}
                continue
            count, kept = _search_file(full, size, rx, deadline, room)
        except OSError as exc:
            yield {"rel": rel, "skipped": exc.strerror or type(exc).__name__}
            continue
        if count:
            room -= len(kept)
            yield {"rel": rel, "count": count, "kept": kept}


def add(found: Found, record: dict[str, Any]) -> None:
    """Fold one `scan` record into `found`."""
    if "skipped" in record:
        found.skipped.append((record["rel"], record["skipped"]))
        return
    found.nfiles += 1
    found.total += record["count"]
    found.matches.extend((record["rel"], n, line) for n, line in record["kept"])


def search_here(root: Path, rels: Iterable[str], rx: regex.Pattern, deadline: Deadline) -> Found:
    """`search_files` in this process, where no worker can start: the regex module's timeout then
    bounds the CPU time, which a loaded machine stretches on the wall clock."""
    found = Found()
    try:
        for record in scan(root, rels, rx, deadline):
            add(found, record)
    except GrepTimeout:
        found.timed_out = True
    return found


def _search_file(full: Path, size: int, rx: regex.Pattern, deadline: Deadline | None,
                 room: int) -> tuple[int, list[tuple[int, str]]]:
    """(matching lines, the first `room` of them as (line number, text))."""
    if size <= MAX_FILE_BYTES:
        data = read_regular(full)
        if is_binary(data):
            return 0, []
        text, _ = decode(data)
        if not search(rx, text, deadline):
            return 0, []
        lines = text.split("\n")
        if lines and not lines[-1]:  # the text after the last newline is not a line
            lines.pop()
        return _search_lines(iter(lines), rx, deadline, room)
    with open(full, "rb") as fh:
        if is_binary(fh.read(8192)):
            return 0, []
    if size > COUNT_LIMIT_BYTES:  # read_file streams these as utf-8 with replacement: so do we
        return _search_lines(_stream(full, "utf-8", "replace"), rx, deadline, room)
    try:
        return _search_lines(_stream(full, "utf-8"), rx, deadline, room)
    except UnicodeDecodeError:  # not utf-8 somewhere: the whole file is latin-1, as read_file shows it
        return _search_lines(_stream(full, "latin-1"), rx, deadline, room)


def _stream(full: Path, encoding: str, errors: str = "strict") -> Iterator[str]:
    """The file's lines (without "\\n"), decoded strictly; a utf-8 BOM is dropped as decode() does."""
    fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        for n, raw in enumerate(fh):
            if n == 0 and encoding == "utf-8" and raw.startswith(BOM):
                raw = raw[len(BOM):]
            yield raw.decode(encoding, errors).rstrip("\n")


def _search_lines(lines: Iterator[str], rx: regex.Pattern, deadline: Deadline | None,
                  room: int) -> tuple[int, list[tuple[int, str]]]:
    """Lines are searched a batch (~1 MB) at a time; only a batch that matches is searched line by
    line (one regex call per line is what makes a big file slow)."""
    count, kept = 0, []
    batch: list[str] = []
    size = first = 0

    def flush() -> None:
        nonlocal count
        if batch and search(rx, "\n".join(batch), deadline):
            for k, line in enumerate(batch):
                if search(rx, line, deadline):
                    count += 1
                    if len(kept) < room:
                        kept.append((first + k, line))
        batch.clear()

    for n, line in enumerate(lines, 1):
        if not batch:
            first = n
        batch.append(line)
        size += len(line)
        if size >= BATCH_CHARS:
            flush()
            size = 0
    flush()
    return count, kept
