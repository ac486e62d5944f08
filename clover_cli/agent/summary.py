"""One line that says what a tool returned, for text-mode front ends (`clover run`'s
`> NAME ARGS -> ok: SUMMARY` line)."""
from __future__ import annotations

import json
import re

_WORDY = re.compile(r"\w")


def result_line(output: str, limit: int = 100) -> str:
    """A one-line summary of a tool's output: JSON (what MCP servers often return, pretty-printed)
    compacted onto one line, else the first line with a word in it (not a lone `{` or fence);
    at most `limit` characters, a cut one ending in "…"."""
    text = (output or "").strip()
    line = _compact_json(text) if text[:1] in "{[" else None
    if line is None:
        line = next((ln.strip() for ln in text.splitlines() if _WORDY.search(ln)), "")
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _compact_json(text: str) -> str | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return json.dumps(data, ensure_ascii=False, default=str)
