"""Parses tool calls out of raw model text (DESIGN.md section 4).

Two forms, as Qwen-family models write them:
  Hermes JSON:     <tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>
  Qwen3-Coder XML: <tool_call><function=read_file><parameter=path>a.py</parameter></function></tool_call>

Tolerant of an unterminated last call (generation stopped before `</tool_call>`), of code inside
arguments (raw newlines in JSON strings, `</tool_call>` inside a JSON string, XML values with
angle brackets) and of a `<think>` section (calls inside it are ignored). Anything that still
cannot be read becomes a FormatError whose message is shown to the model.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from clover_cli.agent.prompt_files import observation

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.S)
_FUNC_RE = re.compile(r"<function=([^>\s]+)\s*>")
_PARAM_RE = re.compile(r"<parameter=([^>\s]+)\s*>")
_PARAM_END_RE = re.compile(r"</parameter>\s*(?=<parameter=|</function>|</tool_call>|$)", re.S)
_DECODER = json.JSONDecoder(strict=False)


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


def split_thinking(raw: str) -> tuple[str, str]:
    """(thinking, answer): the `<think>` section's content and the text outside it."""
    thinking = "".join(m.group(0) for m in _THINK_RE.finditer(raw))
    thinking = thinking.replace("<think>", "").replace("</think>", "").strip()
    answer = _THINK_RE.sub("", raw)
    if "</think>" in answer and "<think>" not in raw:  # template opened <think> in the prompt
        thinking, _, answer = answer.partition("</think>")
        thinking = thinking.strip()
    return thinking, answer


def parse_tool_calls(raw: str, schemas: Mapping[str, Mapping] | None = None) -> ParseResult:
    """Finds every tool call in `raw`; schemas (name -> JSON schema of the parameters) type XML values."""
    _, answer = split_thinking(raw)
    result = ParseResult(text="")
    visible: list[str] = []
    pos = 0
    while True:
        start = answer.find(OPEN, pos)
        if start < 0:
            visible.append(answer[pos:])
            break
        visible.append(answer[pos:start])
        body_start = start + len(OPEN)
        call, end, error = _parse_one(answer, body_start, schemas or {})
        if call is not None:
            result.calls.append(call)
        if error is not None:
            result.errors.append(error)
        pos = end
    result.text = "".join(visible).strip()
    return result


def _parse_one(text: str, i: int, schemas: Mapping[str, Mapping]) -> tuple[ParsedCall | None, int, FormatError | None]:
    """Parses one call whose body starts at i; returns (call, index after it, error)."""
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if text.startswith("<function=", j):
        end = _segment_end(text, j)
        call, err = _parse_xml(text[j:end], schemas)
        return call, _after_close(text, end), err
    if text.startswith("{", j):
        try:
            obj, obj_end = _DECODER.raw_decode(text, j)
        except json.JSONDecodeError:
            end = _segment_end(text, j)
            obj = _repair_json(text[j:end])
            if obj is None:
                return None, _after_close(text, end), _error(
                    observation("parse_not_json"), text[j:end])
            obj_end = end
        call, err = _call_from_json(obj, text[j:obj_end])
        return call, _after_close(text, obj_end), err
    end = _segment_end(text, j)
    return None, _after_close(text, end), _error(observation("parse_no_body"), text[j:end])


def _segment_end(text: str, i: int) -> int:
    """Where the call starting at i ends: its `</tool_call>`, the next `<tool_call>`, or the end."""
    ends = [k for k in (text.find(CLOSE, i), text.find(OPEN, i)) if k >= 0]
    return min(ends) if ends else len(text)


def _after_close(text: str, i: int) -> int:
    """Index after the `</tool_call>` that closes a call ending at i (junk before it is skipped)."""
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if text.startswith(CLOSE, j):
        return j + len(CLOSE)
    close, nxt = text.find(CLOSE, i), text.find(OPEN, i)
    if close >= 0 and (nxt < 0 or close < nxt):
        return close + len(CLOSE)
    return i


def _repair_json(segment: str) -> dict | None:
    """Closes an object cut off at the end of generation (missing quotes/braces)."""
    s = segment.strip()
    for suffix in ("", "}", "}}", '"}}', '"}', "]}}", '"]}}'):
        try:
            obj = _DECODER.decode(s + suffix)
        except json.JSONDecodeError:
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
            args = _DECODER.decode(args) if args.strip() else {}
        except json.JSONDecodeError:
            return None, _error(observation("parse_args_string", name=name), snippet)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, _error(observation("parse_args_not_object", name=name), snippet)
    return ParsedCall(name.strip(), args), None


def _parse_xml(segment: str, schemas: Mapping[str, Mapping]) -> tuple[ParsedCall | None, FormatError | None]:
    m = _FUNC_RE.match(segment)
    if not m:
        return None, _error(observation("parse_function_tag"), segment)
    name = m.group(1).strip()
    body = segment[m.end():]
    props = (schemas.get(name) or {}).get("properties", {})
    args: dict[str, Any] = {}
    pos = 0
    while True:
        pm = _PARAM_RE.search(body, pos)
        if not pm:
            break
        key = pm.group(1)
        end_m = _PARAM_END_RE.search(body, pm.end())
        if end_m:
            value, pos = body[pm.end():end_m.start()], end_m.end()
        else:  # unterminated: the value runs to the next parameter or the end
            nxt = _PARAM_RE.search(body, pm.end())
            stop = nxt.start() if nxt else len(body)
            value = body[pm.end():stop]
            value = re.sub(r"\s*(</parameter>)?\s*(</function>)?\s*$", "", value)
            pos = stop
        args[key] = _typed(_strip_one_newline(value), props.get(key, {}))
    return ParsedCall(name, args), None


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
        return json.loads(value.strip())
    except json.JSONDecodeError:
        if kind == "boolean" and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return value


def _error(message: str, snippet: str) -> FormatError:
    snippet = snippet.strip()
    if len(snippet) > 300:
        snippet = snippet[:300] + " ..."
    return FormatError(message, snippet)


def cut_off_call(raw: str) -> bool:
    """True when the last tool call in the text has no closing `</tool_call>`."""
    answer = split_thinking(raw)[1]
    last = answer.rfind(OPEN)
    return last >= 0 and answer.find(CLOSE, last) < 0


def has_open_call(raw: str) -> bool:
    """True when the text contains tool-call markup (used to decide whether markup is in the content)."""
    return OPEN in split_thinking(raw)[1]
