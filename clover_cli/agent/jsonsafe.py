"""Bounded JSON for model output (docs/agent.md, "Parsing tool calls"): whatever a model writes,
decoding it ends in a value or a one-line reason, never in RecursionError, the int-string limit's
ValueError or a string that cannot be written to the session log.

- Nesting is measured by a linear scan before decoding; deeper than MAX_DEPTH is refused (CPython's
  json recursion would raise RecursionError near 1,000 levels).
- Integers longer than MAX_INT_DIGITS are refused while decoding (Python's int-string limit,
  4,300 digits, raises ValueError; no tool takes numbers a tenth that long).
- Lone surrogates (`"\\ud800"` escapes, or unpaired ones in the raw text) become U+FFFD, so the value
  can always be encoded as UTF-8.
"""
from __future__ import annotations

import json
import re
from typing import Any

from clover_cli.tools.argcheck import scrub  # lone surrogates -> U+FFFD (one definition for both layers)

MAX_DEPTH = 64
MAX_INT_DIGITS = 100

# One token of a JSON text, for the scan: a whole string (escapes skipped), a bracket, a tool-call
# tag outside strings, or an unterminated string's opening quote.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|</tool_call>|<tool_call>|"', re.S)


class JSONLimitError(ValueError):
    """The JSON is too deep or holds a too long number; `key` names the observation text."""

    def __init__(self, key: str, limit: int) -> None:
        super().__init__(f"{key} (limit {limit})")
        self.key = key
        self.limit = limit


def scrub_value(value: Any) -> Any:
    """scrub() applied to every string (and key) of a decoded JSON value, iteratively."""
    if isinstance(value, str):
        return scrub(value)
    if not isinstance(value, (dict, list)):
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, node = stack.pop()
        if isinstance(node, str):
            parent[key] = scrub(node)
        elif isinstance(node, list):
            copy = list(node)
            parent[key] = copy
            stack.extend((copy, i, v) for i, v in enumerate(copy))
        elif isinstance(node, dict):
            copy_d = {scrub(k) if isinstance(k, str) else k: v for k, v in node.items()}
            parent[key] = copy_d
            stack.extend((copy_d, k, v) for k, v in copy_d.items())
    return root[0]


def scan(text: str, start: int = 0) -> tuple[int, int, str]:
    """(end, deepest nesting, why) of the JSON value starting at `start`, by brackets outside
    strings. why: "closed" (end is after the bracket that closed the value), "tag" (a `<tool_call>`
    or `</tool_call>` outside a string starts at end) or "eof" (the text ended first)."""
    depth = deepest = 0
    pos = start
    while True:
        m = _TOKEN.search(text, pos)
        if m is None:
            return len(text), deepest, "eof"
        tok = m.group()
        if tok in ("{", "["):
            depth += 1
            deepest = max(deepest, depth)
        elif tok in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return m.end(), deepest, "closed"
        elif tok.startswith("<"):
            return m.start(), deepest, "tag"
        elif tok == '"':  # a string that never closes runs to the end
            return len(text), deepest, "eof"
        elif depth == 0:
            return m.end(), deepest, "closed"  # a bare string value
        pos = m.end()


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONLimitError("parse_number_too_long", MAX_INT_DIGITS)
    return int(digits)


_DECODER = json.JSONDecoder(strict=False, parse_int=_parse_int)


def raw_decode(text: str, start: int = 0) -> tuple[Any, int]:
    """json's raw_decode (raw newlines allowed in strings), bounded and scrubbed.
    Raises json.JSONDecodeError or JSONLimitError."""
    _, deepest, _ = scan(text, start)
    if deepest > MAX_DEPTH:
        raise JSONLimitError("parse_too_deep", MAX_DEPTH)
    try:
        obj, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        raise JSONLimitError("parse_too_deep", MAX_DEPTH) from None
    return scrub_value(obj), end


def loads(text: str) -> Any:
    """json.loads, bounded and scrubbed (trailing whitespace allowed, nothing else)."""
    start = len(text) - len(text.lstrip())
    obj, end = raw_decode(text, start)
    if text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end)
    return obj
