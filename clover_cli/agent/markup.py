"""The one rule for the model's markup on the screen (docs/agent.md, "Visible text").

Streamed model text is marked here, once, as answer, thinking or call; the backends' BlockText
events carry the mark (`kind`) and front ends (TUI, `clover run`, ACP) only render it:

* `<think>...</think>`: "thinking" (the tags are dropped; a stray `</think>` in the answer too);
* every tool-call form parsing.py reads (`<tool_call>...</tool_call>`, Hermes JSON and Qwen3-Coder
  XML; DiffusionGemma's `<|tool_call>...<tool_call|>`): "call", never shown. A call ends where
  parse_tool_calls says it does (parsing.call_end), so a closing tag quoted inside an argument
  does not end it;
* the rest: "answer".

Tags cut between deltas are held back until the next one decides them. Call text is kept until
the model step ends (`HeldCalls`): when the step runs no call, the agent gives it back as one
"unrun_call" BlockText, shown as written with UNFINISHED_NOTICE, so no text is ever lost.
Headless: no UI here.
"""
from __future__ import annotations

import re

from clover_cli.agent import gemma_calls, parsing
from clover_cli.agent.events import BlockText, TextKind

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_TAGS = {parsing.OPEN: parsing.CLOSE, gemma_calls.OPEN: gemma_calls.CLOSE}  # open -> close
_ANSWER_TAGS = (THINK_OPEN, THINK_CLOSE, *CALL_TAGS)
UNFINISHED_NOTICE = "The model's tool call was not run (unfinished or malformed); its text is shown as written."
_NAME = re.compile(r'"name"\s*:\s*"([^"]{1,80})"|<function=([^>\s]{1,80})|call:([^{\s<]{1,80})')

Piece = tuple[str, TextKind]


class MarkupSplitter:
    """Feed text deltas with `feed`; each returns the (piece, kind) pairs decided so far. `flush`
    at the end of the stream returns the rest. `inside`: the stream starts inside `<think>` (the
    chat template opened it in the prompt)."""

    def __init__(self, inside: bool = False) -> None:
        self.kind: TextKind = "thinking" if inside else "answer"
        self._pending = ""  # answer or thinking text that may be the start of a tag
        self._call = ""  # the open call's text so far, its opening tag included
        self._searched = 0  # how much of _call was searched for its closing tag

    def feed(self, text: str) -> list[Piece]:
        """The (piece, kind) pairs of this delta; adjacent pieces of one kind are merged."""
        out: list[Piece] = []
        text, self._pending = self._pending + text, ""
        while text:
            text = self._call_part(text, out) if self.kind == "call" else self._outside(text, out)
        return out

    def _outside(self, text: str, out: list[Piece]) -> str:
        """Answer or thinking text up to the next tag that changes the kind; returns the rest."""
        tags = (THINK_CLOSE,) if self.kind == "thinking" else _ANSWER_TAGS
        found = [(k, tag) for tag in tags if (k := text.find(tag)) >= 0]
        if not found:
            hold = max(_partial_tag(text, tag) for tag in tags)
            self._pending = text[len(text) - hold:]
            _add(out, text[:len(text) - hold], self.kind)
            return ""
        k, tag = min(found)
        _add(out, text[:k], self.kind)
        if tag in CALL_TAGS:
            self.kind, self._call, self._searched = "call", tag, len(tag)
        else:
            self.kind = "thinking" if tag == THINK_OPEN else "answer"
        return text[k + len(tag):]

    def _call_part(self, text: str, out: list[Piece]) -> str:
        """Adds text to the open call; when the call has ended, its text goes out and the rest
        (after the call) is returned."""
        self._call += text
        close = CALL_TAGS[parsing.OPEN if self._call.startswith(parsing.OPEN) else gemma_calls.OPEN]
        start, self._searched = max(self._searched - len(close) + 1, 0), len(self._call)
        if close not in self._call[start:]:
            return ""
        end = parsing.call_end(self._call)
        return "" if end is None else self._end_call(end, out)

    def _end_call(self, end: int, out: list[Piece]) -> str:
        _add(out, self._call[:end], "call")
        rest, self._call, self.kind = self._call[end:], "", "answer"
        return rest

    def flush(self) -> list[Piece]:
        """The end of the stream: what was held back (a call that never closed ends where the
        parser says; the text after it is split again)."""
        if self.kind == "call":
            out: list[Piece] = []
            rest = self._end_call(parsing.call_end(self._call, final=True), out)
            return out + self.feed(rest) + self.flush()
        pending, self._pending = self._pending, ""
        return [(pending, self.kind)] if pending else []


def _add(out: list[Piece], piece: str, kind: TextKind) -> None:
    if not piece:
        return
    if out and out[-1][1] == kind:
        out[-1] = (out[-1][0] + piece, kind)
    else:
        out.append((piece, kind))


def _partial_tag(text: str, tag: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of tag."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


def block_texts(splitter: MarkupSplitter, text: str, block_index: int, final: bool = False) -> list[BlockText]:
    """BlockText events for one delta of a model's stream, marked by the rule."""
    pieces = splitter.feed(text) + (splitter.flush() if final else [])
    return [BlockText(piece, block_index, kind=kind) for piece, kind in pieces]


def split_message(text: str, called: bool) -> list[Piece]:
    """A whole assistant message (a resumed session's history) marked by the rule; call text is
    "unrun_call" when the message ran no call (`called` False)."""
    splitter = MarkupSplitter()
    pieces = splitter.feed(text) + splitter.flush()
    if called:
        return pieces
    return [(p, "unrun_call" if kind == "call" else kind) for p, kind in pieces]


class HeldCalls:
    """The call text of one model step, hidden while it streamed: `note` each BlockText passed on;
    `release` (the step ran no call) returns it as an "unrun_call" BlockText, once."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._block = 0

    def note(self, item: object) -> None:
        """Remember the text of a "call" BlockText."""
        if isinstance(item, BlockText) and item.kind == "call":
            self._parts.append(item.text)
            self._block = item.block_index

    def release(self) -> list[BlockText]:
        """The held call text as one "unrun_call" BlockText ([] when there is none)."""
        text, self._parts = "".join(self._parts), []
        return [BlockText(text, self._block, kind="unrun_call")] if text.strip() else []


def attempted(snippet: str) -> str:
    """The tool a malformed call tried to name ("read_file"), or "" when it names none."""
    m = _NAME.search(snippet or "")
    return next((g for g in m.groups() if g), "") if m else ""


def describe_attempt(err) -> str:
    """One line for the user about a malformed call (a parsing.FormatError): the tool it tried,
    why it could not be run, and the start of what the model wrote."""
    name = attempted(err.snippet)
    snippet = " ".join((err.snippet or "").split())[:80]
    return f"{name or 'a call naming no tool'}: {err.message.rstrip('.')} (wrote: {snippet})"
