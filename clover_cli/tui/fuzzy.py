"""Fuzzy matching of repository paths for the `@` file picker (no UI here).

The candidate list is the tools' own view of the repository (`agent.interface.repo_files`: in git,
`git ls-files` plus untracked files that are not ignored; outside git a walk that honours the
.gitignore files). A query matches a path when its characters appear in order; the score favours
matches in the file name, at the start of a path segment and in runs, the idea popularised by
fzf (github.com/junegunn/fzf) and editors' "go to file" pickers.

Kept rather than Textual's `fuzzy.Matcher` (made for the command palette): that one does not
know paths, so `agentconfig` ranks `agent/mcp/config.py` above `agent/config.py`; both take about
30 ms over 20,000 paths.
"""
from __future__ import annotations

import time
from pathlib import Path

SEPARATORS = "/_-. "


def score(query: str, path: str) -> float | None:
    """How well `query` matches `path` (higher is better); None when it does not match.

    Greedy from each place the first character occurs; the best of those alignments counts."""
    if not query:
        return 0.0
    q, p = query.lower(), path.lower()
    best_total = None
    start = p.find(q[0])
    while start >= 0:
        total = _align(q, p, start)
        if total is None:
            break  # no later start can match either
        best_total = total if best_total is None else max(best_total, total)
        start = p.find(q[0], start + 1)
    return None if best_total is None else best_total - 0.01 * len(path)  # shorter first among equals


def _align(q: str, p: str, first: int) -> float | None:
    name_start = p.rfind("/") + 1
    pos, total, run, last = first, 0.0, 0, -2
    for ch in q:
        found = p.find(ch, pos)
        if found < 0:
            return None
        bonus = 1.0
        if found == last + 1:
            run += 1
            bonus += 4.0 * run
        else:
            run = 0
        if found == 0 or p[found - 1] in SEPARATORS:
            bonus += 3.0
        if found >= name_start:
            bonus += 2.0
        total += bonus
        last, pos = found, found + 1
    return total


def best(query: str, paths: list[str], limit: int = 8) -> list[str]:
    """The `limit` best matches of `query` among `paths`."""
    scored = [(s, p) for p in paths if (s := score(query, p)) is not None]
    scored.sort(key=lambda sp: (-sp[0], sp[1]))
    return [p for _, p in scored[:limit]]


class FileIndex:
    """The repository's file list, re-read when older than `max_age` seconds."""

    def __init__(self, root: Path, max_age: float = 10.0) -> None:
        self.root = Path(root)
        self.max_age = max_age
        self._files: list[str] = []
        self._read_at = float("-inf")

    def files(self) -> list[str]:
        if time.monotonic() - self._read_at > self.max_age:
            from clover_cli.agent.interface import repo_files  # [] for a broken repository
            self._files = repo_files(self.root)
            self._read_at = time.monotonic()
        return self._files
