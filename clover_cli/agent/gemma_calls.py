"""Gemma 4's native tool-call syntax, which DiffusionGemma's chat template uses (docs/agent.md,
"Parsing tool calls"):

    <|tool_call>call:read_file{path:<|"|>a.py<|"|>,limit:20}<tool_call|>

Written from Google's published Gemma 4 function-calling format: the arguments are an object of
bare keys; strings are enclosed in the `<|"|>` delimiter (anything inside, newlines, braces and
quotes included, is the string); numbers, true/false/null, [lists] and {objects} are written as
in JSON. Tolerant as the other forms are: an unterminated last call (generation stopped inside
it) is returned and marked cut off; a call that cannot be read becomes a FormatError.
"""
from __future__ import annotations

import re
from typing import Any

from clover_cli.agent import jsonsafe
from clover_cli.agent.prompt_files import observation

OPEN, CLOSE, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
_NUMBER_RE = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_BARE_STOP = re.compile(r"[,}\]]|<tool_call\|>")
_KEY_RE = re.compile(r"\s*([^\s:{}\[\],<>]+)\s*:")


class _Cut(Exception):
    """The text ended inside the call; `value` is what was read so far."""

    def __init__(self, value: Any) -> None:
        super().__init__("cut")
        self.value = value


class _Bad(Exception):
    pass


class _Reader:
    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > jsonsafe.MAX_DEPTH:
            raise _Bad(observation("parse_too_deep", limit=jsonsafe.MAX_DEPTH))
        self.space()
        text = self.text
        if self.pos >= len(text):
            raise _Cut(None)
        if text.startswith(QUOTE, self.pos):
            start = self.pos + len(QUOTE)
            end = text.find(QUOTE, start)
            if end < 0:
                raise _Cut(_strip_close(text[start:]))
            self.pos = end + len(QUOTE)
            return text[start:end]
        if text[self.pos] == "{":
            return self.obj(depth)
        if text[self.pos] == "[":
            return self.array(depth)
        m = _BARE_STOP.search(text, self.pos)
        raw = text[self.pos:m.start() if m else len(text)].strip()
        self.pos = m.start() if m else len(text)
        if raw in ("true", "false"):
            return raw == "true"
        if raw == "null":
            return None
        if _NUMBER_RE.fullmatch(raw):
            if len(raw) > jsonsafe.MAX_INT_DIGITS:
                raise _Bad(observation("parse_number_too_long", limit=jsonsafe.MAX_INT_DIGITS))
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
        if not raw:
            raise _Bad(observation("parse_gemma_call"))
        return raw  # an unquoted word: the tool's type check decides

    def obj(self, depth: int) -> dict:
        out: dict[str, Any] = {}
        self.pos += 1  # "{"
        while True:
            self.space()
            if self.pos >= len(self.text):
                raise _Cut(out)
            if self.text[self.pos] == "}":
                self.pos += 1
                return out
            if self.text.startswith(QUOTE, self.pos):
                key = self.value(depth + 1)
                self.space()
                if not self.text.startswith(":", self.pos):
                    raise _Bad(observation("parse_gemma_call"))
                self.pos += 1
            else:
                m = _KEY_RE.match(self.text, self.pos)
                if not m:
                    rest = self.text[self.pos:]
                    if CLOSE in rest or OPEN in rest:
                        raise _Bad(observation("parse_gemma_call"))
                    raise _Cut(out)  # a key being written when the text ended
                key, self.pos = m.group(1), m.end()
            try:
                out[str(key)] = self.value(depth + 1)
            except _Cut as cut:
                if cut.value is not None:
                    out[str(key)] = cut.value
                raise _Cut(out) from None
            self.space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.pos < len(self.text) and self.text[self.pos] != "}":
                raise _Bad(observation("parse_gemma_call"))

    def array(self, depth: int) -> list:
        out: list[Any] = []
        self.pos += 1  # "["
        while True:
            self.space()
            if self.pos >= len(self.text):
                raise _Cut(out)
            if self.text[self.pos] == "]":
                self.pos += 1
                return out
            try:
                out.append(self.value(depth + 1))
            except _Cut as cut:
                if cut.value is not None:
                    out.append(cut.value)
                raise _Cut(out) from None
            self.space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.pos < len(self.text) and self.text[self.pos] != "]":
                raise _Bad(observation("parse_gemma_call"))


def _strip_close(value: str) -> str:
    """A string that ran to the end of the text, without the call's closing it ends with."""
    value = value.rstrip()
    for tail in (CLOSE, "}"):
        if value.endswith(tail):
            value = value[:-len(tail)].rstrip()
    return value


def parse_one(text: str, start: int) -> tuple[tuple[str, dict] | None, int, str | None, bool]:
    """Reads the call whose body starts at `start` (just after `<|tool_call>`): ((name,
    arguments) or None, index after the call, error message or None, cut off)."""
    reader = _Reader(text, start)
    reader.space()
    close = text.find(CLOSE, start)
    nxt = text.find(OPEN, start)
    fallback = min(k for k in (close, nxt, len(text)) if k >= 0)
    after_fallback = fallback + len(CLOSE) if fallback == close else fallback
    if not text.startswith("call:", reader.pos):
        return None, after_fallback, observation("parse_gemma_call"), False
    brace = text.find("{", reader.pos)
    name = text[reader.pos + len("call:"):brace if brace >= 0 else fallback].strip()
    if not name or (brace < 0 and fallback < len(text)) or (0 <= fallback < brace and fallback < len(text)):
        return None, after_fallback, observation("parse_gemma_call"), False
    if brace < 0:  # ended before the arguments began
        return (name, {}), len(text), None, True
    reader.pos = brace
    try:
        args = reader.obj(1)
    except _Cut as cut:
        return (name, cut.value or {}), len(text), None, True
    except _Bad as bad:
        return None, after_fallback, str(bad), False
    reader.space()
    if text.startswith(CLOSE, reader.pos):
        return (name, args), reader.pos + len(CLOSE), None, False
    if reader.pos >= len(text):
        return (name, args), len(text), None, True  # the closing token never came
    return (name, args), reader.pos, None, False  # junk after the arguments stays visible text
