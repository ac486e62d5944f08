"""The one line worth showing from an OpenAI-compatible server's error body, whatever its dialect
(docs/agent.md, "Server dialects"):

- `{"error": {"message": ...}}` — OpenAI, vLLM, llama.cpp's llama-server, Ollama, llama-cpp-python;
- `{"object": "error", "message": ...}` — SGLang (and vLLM before its ErrorInfo wrapper);
- `{"error": "text"}` — LM Studio; `{"detail": "text"}` or `{"detail": [...]}` — FastAPI's own
  answers (a 422 validation list, an HTTPException); anything else is shown as plain text.

A validation list names one error per member of a union the server tried: llama-cpp-python
checks an assistant message against its system, user, assistant, tool and function message types
and reports every mismatch (HTTP 500, "7 validation errors:" followed by one Python dict per line).
The first of those ("Input should be 'system'") is not the cause, so, message by message, the
errors that only say "this is another kind of message" are dropped and the rest are shown (unless
the message's role is none a chat message has: then that is the cause).

Standard library only.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any

LIMIT = 300
SCAN_LIMIT = 50_000  # the most of an error message read for a validation list

# FastAPI's str(RequestValidationError): "N validation error(s):\n  {dict}\n  {dict}..." (newer),
# or the repr of the list (older); pydantic's own str(ValidationError) names the location on one
# line and the message, indented, under it.
_COUNT = re.compile(r"(\d+) validation errors?\b")
_PYDANTIC_ITEM = re.compile(r"^(?P<loc>[\w.\[\]-]+)\n\s+(?P<msg>[^\n\[]+?)\s*\[type=(?P<type>[\w.]+)"
                            r"(?:, input_value=(?P<input>[^,\]]*))?", re.MULTILINE)


def error_detail(raw: str) -> str:
    """The server's error message from an error body (JSON or not), one line."""
    try:
        data = json.loads(raw)
    except ValueError:
        return one_line(_explain(raw))
    return one_line(_explain(_message_of(data)))


def is_validation_error(detail: str) -> bool:
    """Whether an error line reports the request's validation (sending it again cannot help)."""
    return "validation error" in detail


def _message_of(data: Any) -> Any:
    if isinstance(data, dict):
        for key in ("error", "detail"):
            if key in data and data[key] not in (None, "", [], {}):
                return _message_of(data[key])
        if "message" in data:
            return data["message"] if isinstance(data["message"], str) else _message_of(data["message"])
        if "msg" in data and "loc" in data:
            return [data]
        return json.dumps(data, ensure_ascii=False)
    if isinstance(data, list) and data and all(isinstance(e, dict) and "msg" in e for e in data):
        return data
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _explain(message: Any) -> str:
    """`message` (a string or a list of validation errors) with a validation list summarised."""
    if isinstance(message, list):
        return summarise(message)
    text = str(message)
    errors = _errors_in_text(text)
    return summarise(errors, _count(text)) if errors else text


def _count(text: str) -> int | None:
    m = _COUNT.search(text)
    return int(m.group(1)) if m else None


def _errors_in_text(text: str) -> list[dict]:
    """The validation errors a message lists as Python reprs or in pydantic's own layout."""
    if "validation error" not in text and not text.lstrip().startswith("[{"):
        return []
    text = text[:SCAN_LIMIT]
    found: list[dict] = []
    stripped = text.strip()
    if stripped.startswith("[{"):
        found = _literal_list(stripped)
    if not found:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{") and "'msg'" in line:
                item = _literal(line)
                if isinstance(item, dict):
                    found.append(item)
    if not found:
        for m in _PYDANTIC_ITEM.finditer(text):
            found.append({"loc": tuple(m.group("loc").split(".")), "msg": m.group("msg").strip(),
                          "type": m.group("type"), **({"input": _value(m.group("input"))} if m.group("input") else {})})
    return found


def _value(text: str) -> Any:
    """A Python repr as its value, or the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _literal(text: str) -> Any:
    """A validation error's repr as a dict (the fields we show, when the repr holds objects)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        loc = re.search(r"'loc': \(([^)]*)\)", text)
        msg = re.search(r"""'msg': (['"])(.*?)\1""", text)
        kind = re.search(r"'type': '([^']*)'", text)
        if not (loc and msg):
            return None
        parts = tuple(p.strip().strip("'\"") for p in loc.group(1).split(",") if p.strip())
        return {"loc": parts, "msg": msg.group(2), "type": kind.group(1) if kind else ""}


def _literal_list(text: str) -> list[dict]:
    value = _literal(text)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def summarise(errors: list[dict], count: int | None = None) -> str:
    """A validation error list as one line that leads with the errors naming the cause. Errors
    are taken per list item (one message): where one of the item's errors says something other
    than "`role` (or `type`) should be another kind's value" or "Field required", those two kinds
    are dropped, being about the kinds the item is not; where the item's role is none a chat
    message has, every kind's refusal of it is the cause and is shown once."""
    errors = [e for e in errors if isinstance(e, dict)]
    total = count or len(errors)
    groups: dict[tuple, list[dict]] = {}
    for e in errors:
        groups.setdefault(_item_of(e), []).append(e)
    kept: list[dict] = []
    for group in groups.values():
        refusals = [e for e in group if _other_kind(e)]
        specific = [e for e in group if not _other_kind(e) and e.get("type") != "missing"]
        missing = [e for e in group if not _other_kind(e) and e.get("type") == "missing"]
        if refusals and not any(e.get("input") in _CHAT_ROLES for e in refusals):
            kept.append(_merged(refusals))  # a role no kind takes: that is the cause
        else:
            kept += specific or missing or [_merged(refusals)]
    shown = "; ".join(_describe(e) for e in kept[:3])
    if len(kept) > 3:
        shown += f"; and {len(kept) - 3} more"
    if len(kept) < total and not (len(kept) == 1 and kept[0].get("merged") == total):
        return f"invalid request: {shown} ({total} validation errors, the rest about other message kinds)"
    return f"invalid request: {shown}"


_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _item_of(error: dict) -> tuple:
    """The list item an error is about: its location up to the first list index (or all of it)."""
    loc = error.get("loc") or ()
    loc = tuple(loc) if isinstance(loc, (list, tuple)) else (loc,)
    for i, part in enumerate(loc):
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            return loc[:i + 1]
    return loc


def _merged(group: list[dict]) -> dict:
    """Every kind's refusal of one item's role, as one error naming the values allowed."""
    wanted = [m.group(1) for e in group for m in [re.search(r"Input should be (.+)$", str(e.get("msg", "")))] if m]
    first = dict(group[0])
    if len(wanted) > 1:
        first["msg"] = "Input should be one of " + ", ".join(wanted)
    first["merged"] = len(group)
    return first


def _other_kind(error: dict) -> bool:
    loc = error.get("loc") or ()
    last = str(loc[-1]) if isinstance(loc, (list, tuple)) and loc else ""
    return error.get("type") == "literal_error" and last in ("role", "type")


def _describe(error: dict) -> str:
    loc = error.get("loc") or ()
    parts = [str(p) for p in (loc if isinstance(loc, (list, tuple)) else (loc,))
             if str(p) not in ("body", "typed-dict", "function-after", "function-before", "union")]
    where = ".".join(parts) or "request"
    text = f"{where}: {error.get('msg', '')}"
    if "input" in error and error.get("type") != "missing":
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        if len(shown) <= 40:
            text += f" (got {shown})"
    return text


def one_line(value: Any) -> str:
    """`value` as one line of at most LIMIT characters."""
    return " ".join(str(value).split())[:LIMIT]


def stream_error_payload(text: str) -> Any:
    """An in-stream error's payload: its JSON's `error` object, the JSON, or the text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    return data.get("error", data) if isinstance(data, dict) and data.get("error") is not None else data
