"""The scrolling transcript: user prompts, streamed answers, thinking, tool panels, notices."""
from __future__ import annotations

from typing import Any, Mapping

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from clover_cli.agent.markup import UNFINISHED_NOTICE
from clover_cli.tui.textfilter import visible_controls
from clover_cli.tui.widgets.messages import (AssistantMessage, NoticeLine, SummaryEntry,
                                             ThinkingBlock, UserMessage)
from clover_cli.tui.widgets.tool_panel import ToolPanel, code_view


class Transcript(VerticalScroll):
    """Owns the current streaming message; `flush` renders buffered text once per frame."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id, classes="transcript")
        self._answer: AssistantMessage | None = None
        self._thinking: ThinkingBlock | None = None
        self._retiring: list = []  # closed messages with text still buffered
        self.panels: dict[str, ToolPanel] = {}
        self.scrolled_away = False  # the user scrolled (PageUp, the wheel) and is not back at the end
        self.unseen = False  # ... and something was added below the part in view

    def on_mount(self) -> None:
        self.anchor()

    def release_anchor(self) -> None:
        """Textual calls this for every scroll the user makes (keys, wheel, scroll bar), never
        for the anchor's own scrolling to the end."""
        super().release_anchor()
        self.scrolled_away = True

    def _add(self, widget: Widget) -> Widget:
        if self.scrolled_away:
            self.unseen = True
        self.mount(widget)
        return widget

    def seen_to_the_end(self) -> bool:
        """Forget the scroll once the view is back at the end (and stays there); returns `unseen`."""
        end = self.max_scroll_y
        if self.scrolled_away and self.scroll_y >= end and self.scroll_target_y >= end:
            self.scrolled_away = self.unseen = False
        return self.unseen

    def add_user(self, text: str) -> UserMessage:
        """Append the user's prompt."""
        self.end_message()
        return self._add(UserMessage(text))

    def add_notice(self, message: str, level: str = "info") -> NoticeLine:
        """Append a notice line."""
        return self._add(NoticeLine(message, level))

    def add_summary(self, text: str) -> SummaryEntry:
        """Append a compaction summary (a distinct, folded entry)."""
        self.end_message()
        return self._add(SummaryEntry(text))

    def add_static(self, renderable: Any, classes: str = "") -> Static:
        """Append any renderable (help table, diff, session list)."""
        return self._add(Static(renderable, classes=classes))

    def add_code(self, text: str, lexer: str | None = None) -> Static:
        """Append a syntax-highlighted block (diffs are detected)."""
        return self._add(Static(code_view(text, lexer), classes="code-block"))

    def stream(self, text: str, kind: str = "answer") -> None:
        """Buffer a piece of the model's text, shown as the agent marked it (BlockText.kind; the
        rule is clover_cli/agent/markup.py): call text is not shown, unrun call text with a notice."""
        if kind == "thinking":
            if self._thinking is None:
                self._thinking = self._add(ThinkingBlock())
            self._thinking.push(visible_controls(text))
            return
        if self._thinking is not None:
            self._close_thinking()
        if kind == "unrun_call":
            self._unrun_call(text)
            return
        visible = visible_controls(text) if kind == "answer" else ""
        if not visible:
            return
        if self._answer is None:
            if not visible.strip():
                return
            visible = visible.lstrip("\n")
            self._answer = self._add(AssistantMessage())
        self._answer.push(visible)

    @property
    def dirty(self) -> bool:
        """True when buffered text waits for a frame."""
        return bool((self._answer and self._answer.dirty) or self._retiring
                    or (self._thinking and self._thinking.body.dirty))

    def flush(self) -> None:
        """Render what was buffered since the last frame."""
        if self._answer is not None:
            self._answer.flush()
        if self._thinking is not None:
            self._thinking.flush()
        if self._retiring:
            self._retiring = [w for w in self._retiring if not w.flush() and w.dirty]

    def _unrun_call(self, text: str) -> None:
        """The text of a call that was not run, as written in a code block, and the notice."""
        if self._answer is None:
            self._answer = self._add(AssistantMessage())
        fence = "````" if "```" in text else "```"
        self._answer.push(f"\n\n{fence}\n{visible_controls(text).strip(chr(10))}\n{fence}\n")
        self.end_message()
        self._add(NoticeLine(UNFINISHED_NOTICE, "warning"))

    def end_message(self) -> None:
        """Close the streaming message (a tool call or the step's end follows)."""
        if self._answer is not None:
            self._retire(self._answer)
            self._answer = None
        if self._thinking is not None:
            self._close_thinking()

    def _retire(self, widget) -> None:
        widget.flush()
        if widget.dirty:  # not mounted yet or previous append in flight: a later frame finishes it
            self._retiring.append(widget)

    def _close_thinking(self) -> None:
        self._retire(self._thinking.body)
        self._thinking.finish()
        self._thinking = None

    def add_tool(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> ToolPanel:
        """Append a tool panel (closing the current answer first)."""
        self.end_message()
        panel = ToolPanel(call_id, name, arguments)
        self.panels[call_id] = panel
        return self._add(panel)

    def panel(self, call_id: str, name: str = "", arguments: Mapping[str, Any] | None = None) -> ToolPanel:
        """The panel for `call_id`, created if the proposal event was not seen."""
        if call_id not in self.panels:
            return self.add_tool(call_id, name, arguments or {})
        return self.panels[call_id]

    def last_answer(self) -> str:
        """The assistant's text since the user's last prompt (all its messages, in order)."""
        parts: list[str] = []
        for child in self.children:
            if isinstance(child, UserMessage):
                parts = []
            elif isinstance(child, AssistantMessage) and child.text.strip():
                parts.append(child.text.strip("\n"))
        return "\n\n".join(parts)

    def clear(self) -> None:
        """Remove every entry."""
        self._answer = None
        self._thinking = None
        self._retiring = []
        self.panels.clear()
        self.unseen = self.scrolled_away = False
        self.remove_children()
