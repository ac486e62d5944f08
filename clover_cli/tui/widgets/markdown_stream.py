"""Streamed Markdown that stays cheap as answers and sessions grow.

Measured here (docs/tui.md): Textual's Markdown widget builds a widget per paragraph, list item
and code block, and every append relayouts all of them, so a long streamed answer cost ~100 ms of
UI time per block. This widget keeps one Static per *finished* run of top-level Markdown blocks,
rendered once with Rich's Markdown, and re-renders only the still-growing tail each frame.
"""
from __future__ import annotations

from rich.markdown import Markdown as RichMarkdown
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

CODE_THEME = "ansi_dark"


def split_finished(text: str) -> tuple[str, str]:
    """(finished, tail): `finished` ends at a blank line, outside a code fence, that a new
    unindented line has already followed — nothing after it can change how it renders."""
    cut = 0
    in_fence = False
    pos = 0
    blank_before = False
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # the last, unfinished line
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            if not in_fence and blank_before and pos:
                cut = pos
            in_fence = not in_fence
            blank_before = False
        elif not in_fence:
            if not stripped:
                blank_before = True
            else:
                if blank_before and not line[0].isspace() and not _continues_list(line):
                    cut = pos
                blank_before = False
        pos += len(line)
    return text[:cut], text[cut:]


def _continues_list(line: str) -> bool:
    """An ordered-list item (`2. ...`) continues the list before it: keep them together."""
    head = line.split(".", 1)[0]
    return head.isdigit() and line[len(head):len(head) + 2] == ". "


def render_markdown(text: str) -> RichMarkdown:
    """Rich's Markdown renderable with the project's code theme."""
    return RichMarkdown(text, code_theme=CODE_THEME, inline_code_theme=CODE_THEME)


class StreamedMarkdown(Vertical):
    """`push` buffers deltas; `flush` (once per frame) moves finished blocks into a frozen Static
    and re-renders the tail. `text` is everything pushed so far."""

    def __init__(self, classes: str = "") -> None:
        super().__init__(classes=f"streamed-markdown {classes}".strip())
        self.text = ""
        self._rendered = 0  # chars of `text` already shown (frozen + tail)
        self._frozen = 0  # chars of `text` in frozen Statics
        self._tail = Static("", classes="md-tail")

    def compose(self) -> ComposeResult:
        yield self._tail

    def push(self, delta: str) -> None:
        """Buffer a delta for the next frame."""
        self.text += delta

    @property
    def dirty(self) -> bool:
        """True when pushed text waits for a frame."""
        return self._rendered < len(self.text)

    def flush(self) -> bool:
        """Render what arrived since the last frame; True if anything was drawn."""
        if not self.dirty or not self.is_mounted:
            return False
        finished, tail = split_finished(self.text[self._frozen:])
        if finished.strip():
            self.mount(Static(render_markdown(finished), classes="md-block"), before=self._tail)
        self._frozen += len(finished)
        self._tail.update(render_markdown(tail) if tail.strip() else "")
        self._tail.display = bool(tail.strip())
        self._rendered = len(self.text)
        return True
