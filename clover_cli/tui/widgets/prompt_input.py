"""The prompt: multi-line input with history, Enter to send and Tab to complete slash commands."""
from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from clover_cli.tui import slash

NEWLINE_KEYS = ("ctrl+j", "shift+enter", "alt+enter")


class PromptInput(TextArea):
    """Enter sends; Ctrl+J (or Shift+Enter where the terminal reports it) inserts a new line.

    Up on the first line and Down on the last line walk the history of sent prompts.
    """

    @dataclass
    class Submitted(Message):
        """The user pressed Enter on a non-empty prompt."""

        text: str

    def __init__(self, id: str | None = None) -> None:
        super().__init__("", id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=True, highlight_cursor_line=False)
        self.sent: list[str] = []
        self._history_pos: int | None = None  # index into history while browsing
        self._draft = ""

    def remember(self, text: str) -> None:
        """Add a sent prompt to the history (consecutive duplicates collapse)."""
        if text and (not self.sent or self.sent[-1] != text):
            self.sent.append(text)
        self._history_pos = None

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def history_prev(self) -> bool:
        """Show the previous history entry; False when there is none."""
        if not self.sent:
            return False
        if self._history_pos is None:
            self._draft = self.text
            self._history_pos = len(self.sent)
        if self._history_pos == 0:
            return True
        self._history_pos -= 1
        self._show(self.sent[self._history_pos])
        return True

    def history_next(self) -> bool:
        """Show the next history entry (or the draft after the newest); False when not browsing."""
        if self._history_pos is None:
            return False
        self._history_pos += 1
        if self._history_pos >= len(self.sent):
            self._history_pos = None
            self._show(self._draft)
        else:
            self._show(self.sent[self._history_pos])
        return True

    def complete_slash(self) -> bool:
        """Complete a partly typed slash command; True if the text changed."""
        text = self.text
        matches = slash.complete(text.strip())
        if not matches:
            return False
        if len(matches) == 1:
            new = matches[0] + " "
        else:
            new = _common_prefix(matches)
        if new == text:
            return False
        self._show(new)
        return True

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        row, _ = self.cursor_location
        handled = False
        if key == "enter":
            text = self.text
            if text.strip():
                self.remember(text.rstrip("\n"))
                self.post_message(self.Submitted(text.rstrip("\n")))
                self.load_text("")
            handled = True
        elif key in NEWLINE_KEYS:
            self.insert("\n")
            handled = True
        elif key == "tab" and self.text.startswith("/"):
            self.complete_slash()
            handled = True
        elif key == "up" and row == 0:
            handled = self.history_prev()
        elif key == "down" and row == self.document.line_count - 1:
            handled = self.history_next()
        if handled:
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)


def _common_prefix(words: list[str]) -> str:
    first, last = min(words), max(words)
    n = 0
    while n < len(first) and n < len(last) and first[n] == last[n]:
        n += 1
    return first[:n]
