"""Streaming filter that hides tool-call markup from the assistant's rendered answer.

Tool calls get their own panel (from ToolCallProposed), so `<tool_call>...</tool_call>` sections
and stray `<think>` tags are dropped from the Markdown. Tags may be split across deltas, so a
possible partial tag at the end of a delta is held back until the next one. Hidden call text is
kept until the model step ends: without a proposed call, `flush(called=False)` gives it back to
be shown (the rule of clover_cli/agent/markup.py, docs/agent.md "Visible text").
"""
from __future__ import annotations

_HIDDEN = (("<tool_call>", "</tool_call>"),)
_DROPPED_TAGS = ("<think>", "</think>", "<tool_response>", "</tool_response>")


_CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if chr(c) not in "\n\t"}
_CONTROL_PICTURES[0x7F] = 0x2421


def visible_controls(text: str) -> str:
    """Control characters (except newline and tab) as their Unicode pictures (\x19 -> ␙)."""
    return text.translate(_CONTROL_PICTURES)


class MarkupFilter:
    """Feed deltas with `feed`, call `flush` at the end of a message."""

    def __init__(self) -> None:
        self._pending = ""
        self._closing: str | None = None  # the close tag we are waiting for while hiding
        self._hidden: list[str] = []  # the hidden markup of this model step, as written

    def feed(self, delta: str) -> str:
        """Return the visible part of `delta` that is safe to show now."""
        text = self._pending + visible_controls(delta)
        self._pending = ""
        out: list[str] = []
        while text:
            if self._closing is not None:
                end = text.find(self._closing)
                if end < 0:
                    self._pending = _partial_suffix(text, (self._closing,))
                    self._hidden.append(text[:len(text) - len(self._pending)])
                    return "".join(out)
                self._hidden.append(text[:end + len(self._closing)])
                text = text[end + len(self._closing):]
                self._closing = None
                continue
            idx, tag, close = _first_tag(text)
            if idx < 0:
                keep = _partial_suffix(text, [o for o, _ in _HIDDEN] + list(_DROPPED_TAGS))
                out.append(text[: len(text) - len(keep)])
                self._pending = keep
                break
            out.append(text[:idx])
            if close is not None:
                self._hidden.append(tag)
            text = text[idx + len(tag):]
            self._closing = close
        return "".join(out)

    def flush(self, called: bool = True) -> str:
        """End of message: return what was held back; with `called=False` (the model step ended
        without a proposed call) also the hidden call markup, as written."""
        hidden = "".join(self._hidden) + (self._pending if self._closing is not None else "")
        rest = "" if self._closing is not None else self._pending
        self._pending = ""
        self._closing = None
        self._hidden = []
        return rest if called or not hidden.strip() else hidden + rest


def _first_tag(text: str) -> tuple[int, str, str | None]:
    best = (-1, "", None)
    for open_tag, close_tag in _HIDDEN:
        i = text.find(open_tag)
        if i >= 0 and (best[0] < 0 or i < best[0]):
            best = (i, open_tag, close_tag)
    for tag in _DROPPED_TAGS:
        i = text.find(tag)
        if i >= 0 and (best[0] < 0 or i < best[0]):
            best = (i, tag, None)
    return best


def _partial_suffix(text: str, tags) -> str:
    """The longest suffix of `text` that is a proper prefix of one of `tags`."""
    longest = ""
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), 0, -1):
            if text.endswith(tag[:n]):
                if n > len(longest):
                    longest = text[-n:]
                break
    return longest
