"""Persistent prompt history per repository (docs/tui.md, "History").

One JSON object a line, {"text": ..., "time": ...}, in
`tools.statedir.repo_state_dir(root) / "history.jsonl"` (outside the repository: docs/security.md).
Bounded: when the file grows past twice MAX_ENTRIES lines it is rewritten with the newest
MAX_ENTRIES. Lines that are not such objects are skipped, never fatal; a prompt with lone
surrogates is stored with U+FFFD (it cannot be UTF-8 otherwise). Headless: no UI here.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from clover_cli.tools.argcheck import scrub
from clover_cli.tools.textio import read_regular

MAX_ENTRIES = 500
MAX_CHARS = 20_000  # a prompt longer than this is not remembered (a pasted file)
MAX_BYTES = 16 * 1024 * 1024  # a history file larger than this (or not a regular file) is not read


def history_path(root: Path | str) -> Path:
    """Where the prompt history of the repository at `root` lives."""
    from clover_cli.tools.statedir import repo_state_dir

    return repo_state_dir(root) / "history.jsonl"


class PromptHistory:
    """The prompts sent in a repository, oldest first; `add` appends to memory and to the file."""

    def __init__(self, path: Path | None, limit: int = MAX_ENTRIES) -> None:
        self.path = path
        self.limit = limit
        self.entries: list[str] = self._load()

    @classmethod
    def for_root(cls, root: Path | str) -> "PromptHistory":
        """The repository's history; an unwritable state dir gives an in-memory history."""
        try:
            return cls(history_path(root))
        except OSError:
            return cls(None)

    def _load(self) -> list[str]:
        if self.path is None:
            return []
        try:  # non-blocking and bounded: a FIFO or a huge file in its place costs nothing
            lines = read_regular(self.path, MAX_BYTES).decode("utf-8", errors="replace").splitlines()
        except OSError:
            return []
        out: list[str] = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a corrupt or half-written line
            text = rec.get("text") if isinstance(rec, dict) else None
            if isinstance(text, str) and text and (not out or out[-1] != text):
                out.append(text)
        if len(lines) > 2 * self.limit:
            self._rewrite(out[-self.limit:])
        return out[-self.limit:]

    def _rewrite(self, entries: list[str]) -> None:
        tmp = self.path.with_suffix(".tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                for text in entries:
                    f.write(json.dumps({"text": scrub(text)}, ensure_ascii=False) + "\n")
            os.replace(tmp, self.path)
        except OSError:
            pass

    def add(self, text: str) -> None:
        """Remember a sent prompt (consecutive duplicates collapse; write errors are ignored)."""
        if not text or (self.entries and self.entries[-1] == text):
            return
        self.entries.append(text)
        if len(self.entries) > self.limit:
            del self.entries[: len(self.entries) - self.limit]
        if self.path is None or len(text) > MAX_CHARS:
            return
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(json.dumps({"text": scrub(text), "time": round(time.time())}, ensure_ascii=False) + "\n")
        except OSError:
            pass

    def search(self, query: str, before: int | None = None) -> int | None:
        """Index of the newest entry older than `before` that contains `query` (case-insensitive)."""
        q = query.lower()
        start = len(self.entries) if before is None else before
        for i in range(start - 1, -1, -1):
            if q in self.entries[i].lower():
                return i
        return None
