"""What the agent changed this session: original file contents and a unified diff against them.

Originals come back from the session file on resume, which is state that could have been
tampered with, so every path is validated when it is recorded and again when it is read
(relative, inside the root, no `..`, no symlinked directory on the way, not in `.git/` or
`.clover/`), and files are read without following symlinks (docs/agent.md, "Sessions").
"""
from __future__ import annotations

import difflib
from pathlib import Path

from clover_cli.tools import fsat
from clover_cli.tools.paths import PathError, check_state_path

MAX_SNAPSHOT_BYTES = 2_000_000


def _safe(root: Path, rel: object) -> bool:
    try:
        check_state_path(root, rel)
    except PathError:
        return False
    return True


class _Originals(dict):
    """path -> text before the first write (None: absent); unsafe or malformed entries (from a
    damaged or forged session record) are ignored instead of stored."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self._root = root

    def _ok(self, key: object, value: object) -> bool:
        return isinstance(key, str) and (value is None or isinstance(value, str)) \
            and _safe(self._root, key)

    def __setitem__(self, key, value) -> None:
        if self._ok(key, value):
            super().__setitem__(key, value)

    def setdefault(self, key, default=None):
        if not self._ok(key, default):
            return default
        return super().setdefault(key, default)


def _read_text(root: Path, rel: str) -> tuple[bool, str | None]:
    """(usable, text): text None when the path does not exist; not usable when it is not a
    regular text file inside the root (a symlink, a directory on the way that is a link...)."""
    if not _safe(root, rel):
        return False, None
    try:
        now = fsat.probe(root, rel)
    except (OSError, ValueError):
        return False, None
    if now.kind == "absent":
        return True, None
    if now.kind != "file" or len(now.data or b"") > MAX_SNAPSHOT_BYTES:
        return False, None
    try:
        return True, (now.data or b"").decode("utf-8")
    except UnicodeDecodeError:
        return False, None


class ChangeTracker:
    """Remembers each file's content from before the agent's first write to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.originals: dict[str, str | None] = _Originals(self.root)

    def snapshot(self, paths: list[str]) -> list[tuple[str, str | None]]:
        """Records originals of paths not seen before; returns the new (path, text) pairs."""
        new = []
        for rel in paths:
            if rel in self.originals:
                continue
            usable, text = _read_text(self.root, rel)
            if not usable:
                continue
            self.originals[rel] = text
            new.append((rel, text))
        return new

    def changed_files(self) -> list[str]:
        """Paths whose content differs from the original now."""
        return [rel for rel in sorted(self.originals) if self._current(rel) != self.originals[rel]]

    def _current(self, rel: str) -> str | None:
        return _read_text(self.root, rel)[1]

    def diff(self) -> str:
        """A unified diff (a/ b/ paths, /dev/null for created or deleted files) of every change."""
        parts = []
        for rel in self.changed_files():
            old, new = self.originals[rel], self._current(rel)
            a = f"a/{rel}" if old is not None else "/dev/null"
            b = f"b/{rel}" if new is not None else "/dev/null"
            lines = difflib.unified_diff((old or "").splitlines(keepends=True),
                                         (new or "").splitlines(keepends=True), a, b)
            text = "".join(l if l.endswith("\n") else l + "\n\\ No newline at end of file\n" for l in lines)
            if text:
                parts.append(f"diff --git a/{rel} b/{rel}\n" + text)
        return "".join(parts)
