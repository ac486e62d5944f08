"""The prompt: multi-line input with persistent history, Ctrl+R search, `@` files and slash completion.

Focus stays here (docs/tui.md, "Focus"): Tab never moves it away; keys for the `@` picker and the
history search are handled here so the user keeps typing into the prompt.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from clover_cli.agent.history import PromptHistory
from clover_cli.tui import slash

NEWLINE_KEYS = ("ctrl+j", "shift+enter", "alt+enter")
PLACEHOLDER = "Ask Clover · Enter sends · Ctrl+J new line · @ file · / commands"
MENTION_AT_CURSOR = re.compile(r"(?:^|(?<=\s))@([\w./+-]*)$")


class PromptInput(TextArea):
    """Enter sends; Ctrl+J (or Shift+Enter where the terminal reports it) inserts a new line.

    Up on the first line and Down on the last line walk the history; Ctrl+R searches it.
    """

    @dataclass
    class Submitted(Message):
        """The user pressed Enter on a non-empty prompt."""

        text: str

    def __init__(self, id: str | None = None, history: PromptHistory | None = None) -> None:
        super().__init__("", id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=True, highlight_cursor_line=False, placeholder=PLACEHOLDER)
        self.prompt_history = history or PromptHistory(None)
        self._history_pos: int | None = None  # index into history while browsing
        self._draft = ""
        self.search: tuple[str, int | None] | None = None  # (query, matched index) in Ctrl+R mode
        self.picker = None  # the FilePicker, set by the screen
        self.show_hint: Callable[[str], None] = lambda text: None
        self.scroll_transcript: Callable[[int], None] = lambda pages: None  # PageUp / PageDown

    @property
    def sent(self) -> list[str]:
        return self.prompt_history.entries

    def remember(self, text: str) -> None:
        """Add a sent prompt to the history (consecutive duplicates collapse)."""
        self.prompt_history.add(text)
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

    # ----- Ctrl+R reverse search (as in readline)
    def start_search(self) -> None:
        self._draft = self.text
        self.search = ("", None)
        self._search_hint()

    def _search_step(self, query: str, older: bool = False) -> None:
        """Find the newest entry containing `query` (with `older`: the next one back)."""
        _, index = self.search or ("", None)
        if older:
            found = self.prompt_history.search(query, index)
            failed = found is None
            found = index if found is None else found
        else:
            found = self.prompt_history.search(query) if query else None
            failed = bool(query) and found is None
        self.search = (query, found)
        if found is not None:
            self._show(self.sent[found])
        self._search_hint(failed)

    def _search_hint(self, failed: bool = False) -> None:
        query, _ = self.search or ("", None)
        label = "failing reverse search" if failed else "reverse search"
        self.show_hint(f"({label}) `{query}` · Ctrl+R older · Enter keep · Esc cancel")

    def end_search(self, keep: bool) -> None:
        if not keep:
            self._show(self._draft)
        self.search = None
        self.show_hint("")

    def _search_key(self, event: events.Key) -> bool:
        key = event.key
        query, _ = self.search or ("", None)
        if key == "ctrl+r":
            self._search_step(query, older=True)
        elif key in ("escape", "ctrl+g", "ctrl+c"):
            self.end_search(keep=False)
            return key != "ctrl+c"
        elif key in ("enter", "tab", "right", "left", "end", "home"):
            self.end_search(keep=True)
        elif key == "backspace":
            self._search_step(query[:-1])
        elif event.is_printable and event.character:
            self._search_step(query + event.character)
        else:
            self.end_search(keep=True)
            return False
        return True

    # ----- the @ picker
    def mention_at_cursor(self) -> str | None:
        """The partial `@path` just before the cursor, or None."""
        row, col = self.cursor_location
        match = MENTION_AT_CURSOR.search(self.document.get_line(row)[:col])
        return match.group(1) if match else None

    def accept_mention(self, path: str) -> None:
        """Replace the partial `@query` before the cursor with `@path `."""
        row, col = self.cursor_location
        query = self.mention_at_cursor() or ""
        self.replace(f"{path} ", (row, col - len(query)), (row, col))

    def _picker_key(self, key: str) -> bool:
        picker = self.picker
        if key in ("up", "down"):
            picker.move(-1 if key == "up" else 1)
        elif key in ("enter", "tab"):
            if picker.selected is None:
                picker.close()
                return key == "tab"
            self.accept_mention(picker.selected)
            picker.close()
        elif key == "escape":
            picker.close()
        else:
            return False
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
        if self.search is not None:
            handled = self._search_key(event)
        elif self.picker is not None and self.picker.active and self._picker_key(key):
            handled = True
        elif key == "ctrl+r":
            self.start_search()
            handled = True
        elif key == "enter":
            text = self.text
            if text.strip():
                self.remember(text.rstrip())
                self.post_message(self.Submitted(text.rstrip()))
                self.load_text("")
            handled = True
        elif key in ("pageup", "pagedown"):  # the transcript scrolls; focus stays here
            self.scroll_transcript(-1 if key == "pageup" else 1)
            handled = True
        elif key in NEWLINE_KEYS:
            self.insert("\n")
            handled = True
        elif key == "tab":  # completes a slash command; never moves focus away from the prompt
            if self.text.startswith("/"):
                self.complete_slash()
            handled = True
        elif key == "up" and row == 0:
            handled = self.history_prev()
        elif key == "down" and row == self.document.line_count - 1:
            handled = self.history_next()
        else:
            handled = False
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
