"""Parses tool calls out of raw model text (docs/agent.md).

Two forms, as Qwen-family models write them:
  Hermes JSON:     <tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>
  Qwen3-Coder XML: <tool_call><function=read_file><parameter=path>a.py</parameter></function></tool_call>
and Gemma 4's native form (DiffusionGemma), read by gemma_calls.py:
  <|tool_call>call:read_file{path:<|"|>a.py<|"|>}<tool_call|>

Tolerant of an unterminated last call (generation stopped before `</tool_call>`), of code inside
arguments (raw newlines in JSON strings, `</tool_call>` inside a JSON string, XML values with
angle brackets) and of a `<think>` section (calls inside it are ignored). Anything that still
cannot be read becomes a FormatError whose message is shown to the model.

Only top-level calls are calls (docs/agent.md, "Parsing tool calls"): a JSON call's extent is found
by a scan that skips JSON strings, an XML call's by its parameters, so a `<tool_call>` quoted inside
another call's argument (file content, a patch) is text and is never run. JSON is decoded through
jsonsafe: bounded depth and number size, lone surrogates replaced. `call_end` gives that extent to
the streaming markup rule (markup.py), so the screen hides exactly what is parsed as a call.
"""
from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from clover_cli.agent import gemma_calls, jsonsafe
from clover_cli.agent.jsonsafe import JSONLimitError, scrub
from clover_cli.agent.prompt_files import observation

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.S)
_FUNC_RE = re.compile(r"<function=([^<>]*)>")  # any name: a wrong one is the registry's error
_PARAM_RE = re.compile(r"<parameter=([^>\s]+)\s*>")
_PARAM_END_RE = re.compile(r"</parameter>\s*(?=<parameter=|</function>|</tool_call>|$)", re.S)
_SPACE_RE = re.compile(r"\s*")
_FUNC_END = "</function>"


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class FormatError:
    message: str  # for the model: what was wrong
    snippet: str  # the offending text, shortened


@dataclass
class ParseResult:
    text: str  # the visible text: the answer without tool-call markup and thinking
    calls: list[ParsedCall] = field(default_factory=list)
    errors: list[FormatError] = field(default_factory=list)
    cut_off: bool = False  # the last call read is unterminated (the text ended inside it)


def split_thinking(raw: str) -> tuple[str, str]:
    """(thinking, answer): the `<think>` section's content and the text outside it."""
    thinking = "".join(m.group(0) for m in _THINK_RE.finditer(raw))
    thinking = thinking.replace("<think>", "").replace("</think>", "").strip()
    answer = _THINK_RE.sub("", raw)
    if "</think>" in answer and "<think>" not in raw:  # template opened <think> in the prompt
        thinking, _, answer = answer.partition("</think>")
        thinking = thinking.strip()
    return thinking, answer


class _Marks:
    """Positions of the tags in the answer, found once (so parsing stays linear in the text
    however many calls, parameters or stray tags it holds); next_*(i) is the first at or after i."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lists: dict[str, list[int]] = {}
        self._param_ends: list[tuple[int, int]] | None = None

    def _next(self, tag: str, i: int) -> int:
        found = self._lists.get(tag)
        if found is None:
            found = self._lists[tag] = [m.start() for m in re.finditer(re.escape(tag), self.text)]
        k = bisect.bisect_left(found, i)
        return found[k] if k < len(found) else -1

    def next_open(self, i: int) -> int:
        return self._next(OPEN, i)

    def next_close(self, i: int) -> int:
        return self._next(CLOSE, i)

    def next_value_stop(self, i: int) -> int:
        """The next `<parameter=` or `</function>` (len(text) when neither follows)."""
        ends = [k for k in (self._next("<parameter=", i), self._next(_FUNC_END, i)) if k >= 0]
        return min(ends) if ends else len(self.text)

    def param_end(self, i: int) -> tuple[int, int] | None:
        """(start, end) of the first `</parameter>` at or after i that ends a value (one followed
        by the next parameter, the function's end, the call's end or the end of the text)."""
        if self._param_ends is None:
            self._param_ends = [(m.start(), m.end()) for m in _PARAM_END_RE.finditer(self.text)]
        k = bisect.bisect_left(self._param_ends, (i, -1))
        return self._param_ends[k] if k < len(self._param_ends) else None

    def skip_space(self, i: int) -> int:
        return _SPACE_RE.match(self.text, i).end()


def parse_tool_calls(raw: str, schemas: Mapping[str, Mapping] | None = None) -> ParseResult:
    """Finds every top-level tool call in `raw`; schemas (name -> JSON schema of the parameters)
    type XML values. Lone surrogates in `raw` are replaced first."""
    _, answer = split_thinking(scrub(raw))
    if gemma_calls.OPEN in answer and OPEN not in answer:  # Gemma 4's native calls (gemma_calls.py)
        return _parse_gemma(answer)
    marks = _Marks(answer)
    result = ParseResult(text="")
    visible: list[str] = []
    pos = 0
    while True:
        start = marks.next_open(pos)
        if start < 0:
            visible.append(answer[pos:])
            break
        visible.append(answer[pos:start])
        body_start = start + len(OPEN)
        call, end, error = _parse_one(marks, body_start, schemas or {})
        open_value = isinstance(call, _OpenCall)
        if open_value:
            call = ParsedCall(call.name, call.arguments)
        if call is not None:
            result.calls.append(call)
        if error is not None:
            result.errors.append(error)
        result.cut_off = call is not None and (open_value or not answer.endswith(CLOSE, 0, end))
        pos = max(end, body_start)
    result.text = "".join(visible).strip()
    return result


def _parse_gemma(answer: str) -> ParseResult:
    result = ParseResult(text="")
    visible: list[str] = []
    pos = 0
    while (start := answer.find(gemma_calls.OPEN, pos)) >= 0:
        visible.append(answer[pos:start])
        body = start + len(gemma_calls.OPEN)
        call, end, error, cut = gemma_calls.parse_one(answer, body)
        if call is not None:
            result.calls.append(ParsedCall(*call))
        if error is not None:
            result.errors.append(_error(error, answer[start:end]))
        result.cut_off = call is not None and cut
        pos = max(end, body)
    visible.append(answer[pos:])
    result.text = "".join(visible).strip()
    return result


def _parse_one(marks: _Marks, i: int, schemas: Mapping[str, Mapping]) -> tuple[ParsedCall | None, int, FormatError | None]:
    """Parses one call whose body starts at i; returns (call, index after it, error)."""
    text = marks.text
    j = marks.skip_space(i)
    if text.startswith("<function=", j):
        return _parse_xml(marks, j, schemas)
    if text.startswith("{", j):
        end, deepest, _ = jsonsafe.scan(text, j)
        if deepest > jsonsafe.MAX_DEPTH:
            return None, _after_close(marks, end), _error(
                observation("parse_too_deep", limit=jsonsafe.MAX_DEPTH), text[j:end])
        segment = text[j:end]  # decoded on its own: an error's line count never scans the whole text
        try:
            obj, obj_end = jsonsafe.raw_decode(segment, 0)
            obj_end += j
        except JSONLimitError as exc:
            return None, _after_close(marks, end), _error(observation(exc.key, limit=exc.limit), segment)
        except json.JSONDecodeError:
            obj, obj_end = _repair_json(segment), end
            if obj is None:
                return None, _after_close(marks, end), _error(observation("parse_not_json"), segment)
        call, err = _call_from_json(obj, text[j:obj_end])
        return call, _after_close(marks, obj_end), err
    end = _segment_end(marks, j)
    return None, _after_close(marks, end), _error(observation("parse_no_body"), text[j:end])


def _segment_end(marks: _Marks, i: int) -> int:
    """Where a call without a body starting at i ends: its `</tool_call>`, the next `<tool_call>`,
    or the end."""
    ends = [k for k in (marks.next_close(i), marks.next_open(i)) if k >= 0]
    return min(ends) if ends else len(marks.text)


def _after_close(marks: _Marks, i: int) -> int:
    """Index after the `</tool_call>` that closes a call ending at i (junk before it is skipped)."""
    j = marks.skip_space(i)
    if marks.text.startswith(CLOSE, j):
        return j + len(CLOSE)
    close, nxt = marks.next_close(i), marks.next_open(i)
    if close >= 0 and (nxt < 0 or close < nxt):
        return close + len(CLOSE)
    return i


def _repair_json(segment: str) -> dict | None:
    """Closes an object cut off at the end of generation (missing quotes/braces)."""
    s = segment.strip()
    for suffix in ("", "}", "}}", '"}}', '"}', "]}}", '"]}}'):
        try:
            obj = jsonsafe.loads(s + suffix)
        except ValueError:  # JSONDecodeError, or a limit (then no suffix helps either)
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _call_from_json(obj: Any, snippet: str) -> tuple[ParsedCall | None, FormatError | None]:
    if not isinstance(obj, dict):
        return None, _error(observation("parse_not_object"), snippet)
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, _error(observation("parse_no_name"), snippet)
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = jsonsafe.loads(args) if args.strip() else {}
        except JSONLimitError as exc:
            return None, _error(observation(exc.key, limit=exc.limit), snippet)
        except json.JSONDecodeError:
            return None, _error(observation("parse_args_string", name=name), snippet)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, _error(observation("parse_args_not_object", name=name), snippet)
    return ParsedCall(name.strip(), args), None


@dataclass(frozen=True)
class _OpenCall(ParsedCall):
    """An XML call with a value that has no `</parameter>`: complete only if the model forgot the
    tag, so it counts as cut off (a value quoting a whole call, `...</tool_call>`, may end right
    where generation stopped)."""


def _parse_xml(marks: _Marks, j: int, schemas: Mapping[str, Mapping]) -> tuple[ParsedCall | None, int, FormatError | None]:
    """Parses `<function=NAME><parameter=ARG>value</parameter>...</function>` starting at j, value
    by value: a value runs to its own `</parameter>` (one followed by the next parameter, the
    function's end or the call's end), so tags quoted inside a value stay part of it."""
    text = marks.text
    m = _FUNC_RE.match(text, j)
    if not m:  # the call runs to its `</tool_call>`: a call quoted in it is never read as one
        end = marks.next_close(j)
        end = len(text) if end < 0 else end
        return None, _after_close(marks, end), _error(observation("parse_function_tag"), text[j:end])
    name = m.group(1).strip()
    props = (schemas.get(name) or {}).get("properties", {})
    args: dict[str, Any] = {}
    pos = m.end()
    open_value = False
    while True:
        pm = _PARAM_RE.match(text, marks.skip_space(pos))
        if not pm:
            break
        value_end = marks.param_end(pm.end())
        if value_end:
            value, pos = text[pm.end():value_end[0]], value_end[1]
        else:  # unterminated: the value runs to the next parameter, the function's end or the end
            stop = marks.next_value_stop(pm.end())
            value = text[pm.end():stop]
            if stop == len(text):
                value = _strip_trailing_tags(value)
            pos = stop
            open_value = True
        args[pm.group(1)] = _typed(_strip_one_newline(value), props.get(pm.group(1), {}))
    k = marks.skip_space(pos)
    if text.startswith(_FUNC_END, k):
        pos = k + len(_FUNC_END)
    if open_value and pos == len(text) and text.rstrip().endswith(CLOSE):
        pos = len(text.rstrip()) - len(CLOSE)  # the value's stripped `</tool_call>` closes the call
    if not name:
        return None, _after_close(marks, pos), _error(observation("parse_no_name"), text[j:pos])
    return (_OpenCall if open_value else ParsedCall)(name, args), _after_close(marks, pos), None


def _strip_trailing_tags(value: str) -> str:
    """A value that ran to the end of the text, without the closing tags it ends with."""
    value = value.rstrip()
    for tag in (CLOSE, _FUNC_END, "</parameter>"):
        if value.endswith(tag):
            value = value[:-len(tag)].rstrip()
    return value


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _typed(value: str, schema: Mapping) -> Any:
    """Converts an XML parameter value to the type its schema declares (strings stay raw)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in (None, "string"):
        return value
    try:
        return jsonsafe.loads(value.strip())
    except ValueError:  # not JSON, or over a limit: the raw text goes to the tool's type check
        if kind == "boolean" and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return value


def _error(message: str, snippet: str) -> FormatError:
    snippet = snippet.strip()
    if len(snippet) > 300:
        snippet = snippet[:300] + " ..."
    return FormatError(message, snippet)


def call_end(text: str, final: bool = False) -> int | None:
    """Where the call that `text` opens (it starts with `<tool_call>` or `<|tool_call>`) ends, read
    as parse_tool_calls reads it: the index after its closing tag once no further text can move
    that end (a closing tag quoted inside an open string or value does not end it), else None.
    With `final` (no more text comes): the end the parser gives; what follows it is text."""
    gemma = text.startswith(gemma_calls.OPEN)
    end = _call_extent(text, gemma)
    if final:
        return min(max(end, len(gemma_calls.OPEN if gemma else OPEN)), len(text))
    if _call_extent(text + "\x00", gemma) != end:  # a character more (inside a string) moves it
        return None
    return end if text.endswith(gemma_calls.CLOSE if gemma else CLOSE, 0, end) else None


def _call_extent(text: str, gemma: bool) -> int:
    if gemma:
        return gemma_calls.parse_one(text, len(gemma_calls.OPEN))[1]
    return _parse_one(_Marks(text), len(OPEN), {})[1]


def has_open_call(raw: str) -> bool:
    """True when the text contains tool-call markup (used to decide whether markup is in the content)."""
    answer = split_thinking(raw)[1]
    return OPEN in answer or gemma_calls.OPEN in answer
