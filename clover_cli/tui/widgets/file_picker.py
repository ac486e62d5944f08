"""The `@` file picker: a short list of fuzzy matches shown above the prompt.

Focus never leaves the prompt: PromptInput forwards Up/Down/Enter/Tab/Esc here while the picker is
open (docs/tui.md, "@ files")."""
from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from textual.widgets import Static

from clover_cli.tui.fuzzy import FileIndex, best

ROWS = 6


class FilePicker(Static):
    """`open(query)` shows the best matches; `selected` is the highlighted path."""

    def __init__(self, root: Path) -> None:
        super().__init__("", id="file-picker", markup=True)
        self.index = FileIndex(root)
        self.matches: list[str] = []
        self.cursor = 0
        self.query_text = ""

    @property
    def active(self) -> bool:
        return bool(self.display)

    def open(self, query: str) -> None:
        """Show the matches of `query` (also used to refresh while the user types)."""
        if query != self.query_text or not self.display:
            self.cursor = 0
        self.query_text = query
        self.matches = best(query, self.index.files(), ROWS)
        self.display = True
        self._draw()

    def close(self) -> None:
        self.display = False
        self.matches = []

    def move(self, delta: int) -> None:
        if self.matches:
            self.cursor = (self.cursor + delta) % len(self.matches)
            self._draw()

    @property
    def selected(self) -> str | None:
        return self.matches[self.cursor] if self.matches else None

    def _draw(self) -> None:
        if not self.matches:
            self.update(f"[dim]@{escape(self.query_text)}: no matching file[/dim]")
            return
        rows = []
        for i, path in enumerate(self.matches):
            mark = "[reverse]" if i == self.cursor else ""
            rows.append(f"{mark} {escape(path)} {'[/reverse]' if mark else ''}")
        rows.append("[dim]↑↓ choose · Enter/Tab insert · Esc close[/dim]")
        self.update("\n".join(rows))
