"""Transcript entries: the user's prompt, the assistant's streamed answer, thinking, notices."""
from __future__ import annotations

from rich.markup import escape

from clover_cli.agent.prompt_files import observation
from textual.widgets import Collapsible, Static

from clover_cli.tui.widgets.markdown_stream import StreamedMarkdown


class UserMessage(Static):
    """What the user typed (marked "queued" while it waits for the model to load)."""

    def __init__(self, text: str) -> None:
        super().__init__(escape(text), classes="user-message", markup=True)
        self.text = text
        self.queued = False

    def set_queued(self, queued: bool, note: str = "") -> None:
        """Show or clear the queued mark (`note` replaces it, e.g. why it was not sent)."""
        self.queued = queued
        self.set_class(queued, "-queued")
        mark = "queued: sent when the model is ready" if queued else note
        self.update(escape(self.text) + (f"  [dim]({escape(mark)})[/dim]" if mark else ""))


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
            n = len(self.body.text.split())
            self.title = f"Thinking… ({n} {plural(n, 'word')})"
        return appended

    def finish(self) -> None:
        """Mark the section as done."""
        n = len(self.body.text.split())
        self.title = f"Thought ({n} {plural(n, 'word')})"


class NoticeLine(Static):
    """A one-line notice from the app or the agent (level: info, warning or error)."""

    def __init__(self, message: str, level: str = "info") -> None:
        prefix = {"info": "•", "warning": "!", "error": "✗"}.get(level, "•")
        super().__init__(f"{prefix} {escape(message)}", classes=f"notice notice-{level}")
        self.message = message
        self.level = level


def _summary_head() -> str:
    marker = "\x00"
    return observation("compaction_summary", summary=marker).split(marker)[0].strip()


def is_summary(message: dict) -> bool:
    """True for the user-role message a compaction wrote (not something the user typed)."""
    content = message.get("content")
    return bool(message.get("compaction") or message.get("summary")) or (
        isinstance(content, str) and content.startswith(_summary_head()))


class SummaryEntry(Collapsible):
    """A compaction summary: folded, titled "summary", styled apart from the user's prompts."""

    def __init__(self, text: str) -> None:
        head = _summary_head()
        body = text[len(head):].strip() if text.startswith(head) else text
        self.text = body
        words = len(body.split())
        super().__init__(Static(escape(body), classes="summary-body"),
                         title=f"summary of the earlier conversation ({words} {plural(words, 'word')})",
                         collapsed=True, classes="summary")


def plural(n: int, word: str) -> str:
    """`word` for 1, `word`+s otherwise ("1 line", "2 lines")."""
    return word if n == 1 else word + "s"
