"""Transcript entries: the user's prompt, the assistant's streamed answer, thinking, notices."""
from __future__ import annotations

from rich.markup import escape
from textual.await_complete import AwaitComplete
from textual.widgets import Collapsible, Markdown, Static


class UserMessage(Static):
    """What the user typed."""

    def __init__(self, text: str) -> None:
        super().__init__(escape(text), classes="user-message", markup=True)
        self.text = text


class StreamedMarkdown(Markdown):
    """Markdown that receives deltas and renders them in coalesced appends.

    `push` only buffers; `flush` (called by the transcript's frame timer) appends everything
    buffered since the last frame, and skips a frame while the previous append is still being
    laid out — the same coalescing as Textual's MarkdownStream, with a capped frame rate.
    """

    def __init__(self, classes: str = "") -> None:
        super().__init__("", classes=classes)
        self._buffer: list[str] = []
        self._inflight: AwaitComplete | None = None
        self.text = ""  # everything pushed so far

    def push(self, delta: str) -> None:
        """Buffer a delta for the next frame."""
        if delta:
            self._buffer.append(delta)
            self.text += delta

    @property
    def dirty(self) -> bool:
        """True when buffered text waits for a frame."""
        return bool(self._buffer)

    def flush(self) -> bool:
        """Append buffered text if the previous append has finished; True if it appended."""
        if not self._buffer or not self.is_mounted:
            return False
        if self._inflight is not None and not self._inflight.is_done:
            return False
        chunk = "".join(self._buffer)
        self._buffer.clear()
        self._inflight = self.append(chunk)
        return True


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
