"""Keeping the keyboard on the prompt (a mixin of ChatScreen; docs/tui.md, "Focus").

- The prompt has focus unless the user moves it on purpose with Shift+Tab. A click on the
  transcript, a tool panel or a thinking section (which Textual would focus) does its job (fold,
  unfold, select text) and focus comes straight back to the prompt.
- A printable key typed while another widget has focus goes into the prompt (and focus with it).
- The focused widget shows a ring (clover.tcss), so where keys go is always visible.
- The line above the prompt (`#completions`) carries hints: slash completions, the Ctrl+R search,
  "Interrupting…" — never a toast over the prompt.
"""
from __future__ import annotations

import time

from textual import events
from textual.widgets import Static

from clover_cli.tui import slash
from clover_cli.tui.widgets.file_picker import FilePicker
from clover_cli.tui.widgets.prompt_input import PromptInput


class FocusKeeper:
    """Mixed into ChatScreen; expects `prompt`, `busy` and `interrupt`."""

    _focus_deliberate = False
    _hint_until = 0.0

    @property
    def prompt(self) -> PromptInput:
        return self._one(PromptInput)

    @property
    def picker(self) -> FilePicker:
        return self._one(FilePicker)

    def action_focus_away(self) -> None:
        """Shift+Tab: move focus on purpose (to the transcript's panels), so it stays there."""
        self._focus_deliberate = True
        self.focus_previous()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if event.widget is self.prompt:
            self._focus_deliberate = False
        if not self._focus_deliberate:
            self.call_after_refresh(self.refocus_prompt)

    def refocus_prompt(self) -> None:
        """Put focus back where keys belong: the open approval dialog, else the prompt."""
        if not self.is_attached or self.app.screen is not self or self._focus_deliberate:
            return
        if self.approval is not None:
            dialog = self.approval[1]
            if not dialog.is_attached:
                return
            if self.focused is None or dialog not in self.focused.ancestors_with_self:
                dialog.focus_default()
        elif self.focused is not self.prompt:
            self.prompt.focus(scroll_visible=False)

    def on_key(self, event: events.Key) -> None:
        """A printable key outside the prompt goes into it (or to the open approval dialog)."""
        prompt = self.prompt
        if self.focused is prompt or self.app.screen is not self:
            return
        if self.approval is not None:
            dialog = self.approval[1]
            if not dialog.is_attached:
                return
            if self.focused is None or dialog not in self.focused.ancestors_with_self:
                event.stop()
                dialog.focus_default()
                if event.key in ("y", "a", "n", "escape") and not dialog.asking_feedback:
                    dialog.run_action({"y": "answer('yes')", "a": "answer('always')", "n": "no",
                                       "escape": "answer('no')"}[event.key])
            return
        if event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            self._focus_deliberate = False
            prompt.focus(scroll_visible=False)
            prompt.insert(event.character)

    def action_escape(self) -> None:
        """Esc: interrupt a running turn; otherwise bring the focus back to the prompt."""
        if self.picker.active:
            self.picker.close()
        elif self.busy.stoppable:
            self.interrupt(quit_on_second=False)
        self._focus_deliberate = False
        self.prompt.focus(scroll_visible=False)

    # ----- the hint line above the prompt
    def set_hint(self, text: str, seconds: float = 0.0) -> None:
        """Show `text` above the prompt (for `seconds`, or until replaced; "" hides it)."""
        hint = self.query_one("#completions", Static)
        hint.update(text)
        hint.display = bool(text)
        self._hint_until = time.monotonic() + seconds if seconds else 0.0
        if seconds:
            self.set_timer(seconds, self._expire_hint)

    def _expire_hint(self) -> None:
        if self._hint_until and time.monotonic() >= self._hint_until - 0.01:
            self.set_hint("")

    def prompt_changed(self) -> None:
        """After an edit: slash completions or the @ picker for the text at the cursor."""
        prompt = self.prompt
        if prompt.search is not None:
            return
        text = prompt.text
        matches = slash.complete(text) if text.startswith("/") else []
        if matches:
            self.set_hint("  ".join(slash.COMMANDS[m[1:]][0] for m in matches))
        elif not self._hint_until:
            self.set_hint("")
        query = prompt.mention_at_cursor()
        if query is None:
            self.picker.close()
        else:
            self.picker.open(query)
