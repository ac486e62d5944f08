"""Tags of every file, cached on disk by (mtime, size) under `.clover/repomap/`; changed files
are parsed again, in a process pool when there are many."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

from ..checkpoints import ensure_private_dir
from ..textio import atomic_write, read_regular
from .languages import grammar_for, load_language
from .tags import FileTags, python_tags, query_tags

CACHE_VERSION = 6
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
        try:
            part = pickle.loads(data) if proc.returncode == 0 else None
        except (pickle.UnpicklingError, EOFError, AttributeError):
            part = None
        out.update(part if isinstance(part, dict) else _extract_many(str(root), chunk))
    return out


def _feed(proc: subprocess.Popen, chunk: list[str]) -> None:
    try:
        proc.stdin.write(json.dumps(chunk).encode())
        proc.stdin.close()
    except OSError:
        pass


class TagCache:
    """`{rel: (mtime_ns, size, FileTags | None)}` persisted in `.clover/repomap/tags.pickle`."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.path = self.root / ".clover" / "repomap" / "tags.pickle"

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

    def load(self) -> dict:
        try:
            with open(self.path, "rb") as fh:
                blob = pickle.load(fh)
            return blob["files"] if blob.get("version") == CACHE_VERSION else {}
        except (OSError, EOFError, pickle.UnpicklingError, KeyError, AttributeError, TypeError):
            return {}

    def update(self, stats: dict[str, tuple[int, int]]) -> tuple[dict[str, FileTags], int]:
        """Tags for every file in `stats`, parsing only new or changed ones.

        Returns (tags by file, number of files parsed now).
        """
        cached = self.load()
        stale = [rel for rel, st in stats.items() if rel not in cached or cached[rel][:2] != st]
        fresh = parse_files(self.root, stale) if stale else {}
        files = {rel: (cached[rel] if rel not in fresh else (*stats[rel], fresh[rel]))
                 for rel in stats}
        if stale or len(files) != len(cached):
            ensure_private_dir(self.root)
            data = pickle.dumps({"version": CACHE_VERSION, "files": files},
                                protocol=pickle.HIGHEST_PROTOCOL)
            atomic_write(self.path, data, 0o644)
        return {rel: v[2] for rel, v in files.items() if v[2] is not None}, len(stale)
