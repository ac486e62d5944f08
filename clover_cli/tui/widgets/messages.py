"""Transcript entries: the user's prompt, the assistant's streamed answer, thinking, notices."""
from __future__ import annotations

from rich.markup import escape
from textual.widgets import Collapsible, Static

from clover_cli.tui.widgets.markdown_stream import StreamedMarkdown


class UserMessage(Static):
    """What the user typed."""

    def __init__(self, text: str) -> None:
        super().__init__(escape(text), classes="user-message", markup=True)
        self.text = text


class AssistantMessage(StreamedMarkdown):
    """The assistant's answer, rendered as Markdown while it streams."""

    def __init__(self) -> None:
        super().__init__(classes="assistant-message")


class ThinkingBlock(Collapsible):
    """A `<think>` section, folded; the title counts the words as they arrive."""

    def __init__(self) -> None:
        self.body = StreamedMarkdown(classes="thinking-body")
        super().__init__(self.body, title="Thinking…", collapsed=True, classes="thinking")

    def push(self, delta: str) -> None:
        """Buffer a thinking delta."""
        self.body.push(delta)

    def flush(self) -> bool:
        """Render buffered thinking text and update the word count in the title."""
        appended = self.body.flush()
        if appended:
            self.title = f"Thinking… ({len(self.body.text.split())} words)"
        return appended

    def finish(self) -> None:
        """Mark the section as done."""
        self.title = f"Thought ({len(self.body.text.split())} words)"


class NoticeLine(Static):
    """A one-line notice from the app or the agent (level: info, warning or error)."""

    def __init__(self, message: str, level: str = "info") -> None:
        prefix = {"info": "•", "warning": "!", "error": "✗"}.get(level, "•")
        super().__init__(f"{prefix} {escape(message)}", classes=f"notice notice-{level}")
        self.message = message
        self.level = level
