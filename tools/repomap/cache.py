"""Tags of every file, cached by (mtime, size) in the user's cache dir (store.py); changed files
are parsed again, in a process pool when there are many."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from array import array

from ..textio import read_regular
from .languages import grammar_for, load_language
from .store import SCHEMA, Store
from .tags import FileTags, python_tags, query_tags

CACHE_VERSION = SCHEMA
MAX_FILE_BYTES = 1_000_000
POOL_THRESHOLD = 64  # parse in worker processes when at least this many files changed

_parsers: dict = {}


def extract(root: Path, rel: str) -> FileTags | None:
    """Tags of one file, or None when it is unreadable, binary or too big."""
    spec = grammar_for(rel)
    if spec is None:
        return None
    try:
        data = read_regular(Path(root) / rel)  # never blocks on a FIFO
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES or b"\x00" in data[:8192]:
        return None
    if spec[0] == "tree_sitter_python":
        parser = _parsers.get(spec)
        if parser is None:
            from tree_sitter import Parser
            parser = _parsers[spec] = Parser(load_language(*spec))
        return python_tags(data, parser)
    return query_tags(data, *spec)


def _extract_many(root: str, rels: list[str]) -> list[tuple[str, FileTags | None]]:
    return [(rel, extract(Path(root), rel)) for rel in rels]


def _chunks(root: Path, rels: list[str], n: int) -> list[list[str]]:
    """Split into n size-balanced chunks (largest files first, greedy)."""
    sized = sorted(rels, key=lambda r: -_size(root / r))
    k = max(1, n)
    buckets: list[list[str]] = [[] for _ in range(k)]
    loads = [0] * k
    for rel in sized:
        i = loads.index(min(loads))
        buckets[i].append(rel)
        loads[i] += _size(root / rel) + 2000
    return [b for b in buckets if b]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def parse_files(root: Path, rels: list[str]) -> dict[str, FileTags | None]:
    """Extract tags of `rels`, in one worker process per core when there are many files."""
    workers = os.cpu_count() or 1
    if len(rels) < POOL_THRESHOLD or workers < 2:
        return dict(_extract_many(str(root), rels))
    procs = []
    for chunk in _chunks(root, rels, workers):
        proc = subprocess.Popen([sys.executable, "-m", "clover_cli.tools.repomap.worker", str(root)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        procs.append((proc, chunk))
    out: dict[str, FileTags | None] = {}
    for proc, chunk in procs:  # feed all first, so the workers run in parallel
        threading.Thread(target=_feed, args=(proc, chunk), daemon=True).start()
    for proc, chunk in procs:
        data = proc.stdout.read()
        proc.wait()
        part = _decode_worker(data, chunk) if proc.returncode == 0 else None
        out.update(part if part is not None else _extract_many(str(root), chunk))
    return out


def _decode_worker(data: bytes, chunk: list[str]) -> dict[str, FileTags | None] | None:
    """A worker's JSON answer ({rel: null | [defs_json, names, counts]}), or None if damaged."""
    try:
        raw = json.loads(data)
        out: dict[str, FileTags | None] = {}
        for rel in chunk:
            row = raw[rel]
            if row is None:
                out[rel] = None
                continue
            tags = FileTags.from_row((row[0], row[1], array("i", row[2]).tobytes()))
            if tags is None:
                return None
            out[rel] = tags
        return out
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        return None


def _feed(proc: subprocess.Popen, chunk: list[str]) -> None:
    try:
        proc.stdin.write(json.dumps(chunk).encode())
        proc.stdin.close()
    except OSError:
        pass


class TagCache:
    """`{rel: (mtime_ns, size, FileTags | None)}` kept in the repository's cache database."""

    def __init__(self, root: Path, store: Store | None = None):
        self.root = Path(root).resolve()
        self.store = store or Store(self.root)

    def stats(self, rels: list[str]) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of each file that still exists."""
        out, base = {}, str(self.root) + os.sep
        for rel in rels:
            try:
                st = os.stat(base + rel)
            except OSError:
                continue
            out[rel] = (st.st_mtime_ns, st.st_size)
        return out

    def load(self, stats: dict[str, tuple[int, int]]) -> dict[str, FileTags | None]:
        """Cached tags of the files in `stats` whose (mtime, size) still match and whose row
        decodes; anything else is left out (so parsed again)."""
        out = {}
        for rel, (mtime, size, row) in self.store.load_tags().items():
            if stats.get(rel) != (mtime, size):
                continue
            if row is None:
                out[rel] = None
                continue
            tags = FileTags.from_row(row)
            if tags is not None:
                out[rel] = tags
        return out

    def update(self, stats: dict[str, tuple[int, int]]) -> tuple[dict[str, FileTags], int]:
        """Tags for every file in `stats`, parsing only new, changed or damaged ones.

        Returns (tags by file, number of files parsed now).
        """
        cached = self.load(stats)
        stale = [rel for rel in stats if rel not in cached]
        fresh = parse_files(self.root, stale) if stale else {}
        files = {**cached, **fresh}
        rows = {rel: (*stats[rel], None if fresh[rel] is None else fresh[rel].to_row())
                for rel in fresh}
        self.store.save_tags(rows, set(stats))
        return {rel: t for rel, t in files.items() if t is not None}, len(stale)
