"""What the agent changed this session: original file contents and a unified diff against them."""
from __future__ import annotations

import difflib
from pathlib import Path

MAX_SNAPSHOT_BYTES = 2_000_000


class ChangeTracker:
    """Remembers each file's content from before the agent's first write to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.originals: dict[str, str | None] = {}  # path -> text before the first write (None: absent)

    def snapshot(self, paths: list[str]) -> list[tuple[str, str | None]]:
        """Records originals of paths not seen before; returns the new (path, text) pairs."""
        new = []
        for rel in paths:
            if rel in self.originals:
                continue
            p = self.root / rel
            text: str | None = None
            if p.is_file():
                if p.stat().st_size > MAX_SNAPSHOT_BYTES:
                    continue
                try:
                    text = p.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
            self.originals[rel] = text
            new.append((rel, text))
        return new

    def changed_files(self) -> list[str]:
        """Paths whose content differs from the original now."""
        return [rel for rel in sorted(self.originals) if self._current(rel) != self.originals[rel]]

    def _current(self, rel: str) -> str | None:
        p = self.root / rel
        if not p.is_file():
            return None
        try:
            return p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            return None

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
