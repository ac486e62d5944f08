"""Hiding tool-call markup from the text a front end shows, without ever losing text.

`<tool_call>...</tool_call>` sections are shown as tool panels / one-line summaries instead of text.
What a filter hides is kept until the model step ends (docs/agent.md, "Visible text"): when a
call was proposed it is dropped; when the step ends without one (an unfinished or malformed call,
a cancel, an error), `end` gives the hidden text back so the front end shows it with a notice.
Every front end (TUI, ACP, `clover run`) uses this one rule. Headless: no UI here.
"""
from __future__ import annotations

import re

from clover_cli.agent.backends.base import ThinkSplitter

OPEN, CLOSE = "<tool_call>", "</tool_call>"
UNFINISHED_NOTICE = "The model's tool call was not run (unfinished or malformed); its text is shown as written."
_NAME = re.compile(r'"name"\s*:\s*"([^"]{1,80})"|<function=([^>\s]{1,80})')


class CallTextFilter:
    """Feed model text deltas with `feed` (returns what to show now); call `end(called)` at the end
    of each model step: it returns the raw call text that was hidden when no call was proposed."""

    def __init__(self) -> None:
        self._split = ThinkSplitter(open_tag=OPEN, close_tag=CLOSE)
        self._hidden: list[str] = []

    def feed(self, delta: str) -> str:
        """The visible part of `delta`; call markup (tags included) is held back."""
        shown: list[str] = []
        for piece, inside in self._split.feed(delta):
            self._enter(inside)
            if inside:
                self._hidden[-1] += piece
            else:
                shown.append(piece)
        self._enter(self._split.inside)
        return "".join(shown)

    def _enter(self, inside: bool) -> None:
        """Opens or closes the hidden call text as the splitter's state changes."""
        open_now = bool(self._hidden) and not self._hidden[-1].endswith(CLOSE)
        if inside and not open_now:
            self._hidden.append(OPEN)
        elif not inside and open_now:
            self._hidden[-1] += CLOSE

    @property
    def hiding(self) -> bool:
        """True while text of a call is held back."""
        return bool(self._hidden)

    def end(self, called: bool) -> str:
        """End of a model step. `called`: a tool call was proposed (its text is not shown).
        Returns the text to show now: a tag prefix held back, plus, without a call, the hidden call
        text as written. The filter starts fresh for the next step."""
        rest = self._split.flush()
        tail = "".join(piece for piece, inside in rest if not inside)
        hidden = "".join(self._hidden) + "".join(piece for piece, inside in rest if inside)
        self._split = ThinkSplitter(open_tag=OPEN, close_tag=CLOSE)
        self._hidden = []
        return tail if called else hidden + tail


def attempted(snippet: str) -> str:
    """The tool a malformed call tried to name ("read_file"), or "" when it names none."""
    m = _NAME.search(snippet or "")
    return (m.group(1) or m.group(2)) if m else ""


def describe_attempt(err) -> str:
    """One line for the user about a malformed call (a parsing.FormatError): the tool it tried,
    why it could not be run, and the start of what the model wrote."""
    name = attempted(err.snippet)
    snippet = " ".join((err.snippet or "").split())[:80]
    return f"{name or 'a call naming no tool'}: {err.message.rstrip('.')} (wrote: {snippet})"
