"""Text from files, tools and models made safe to print on a terminal (docs/security.md).

A file or a model's answer may hold terminal control sequences: OSC 52 (writes the user's
clipboard), OSC 0/2 (window title), CSI (clear screen, move the cursor, recolour, hide text),
DCS/APC/PM/SOS strings, 8-bit C1 controls, or a bare carriage return that overwrites the line.
Plain-text output (`clover run` without --json) passes everything it did not write itself through
`clean_text`; JSON output goes through `json_line`, which escapes every control character.

`clean_text` first removes whole, well-formed escape sequences (so their payload does not show as
litter), then drops every remaining C0 control except newline and tab, DEL and every C1 control,
so even a sequence split across two streamed chunks can never reach the terminal: without its
ESC (or C1 introducer) the rest is printable text. Stateless, so it is safe to apply per chunk.

Both also make the text encodable: a lone surrogate (a `\\ud800` escape from a server, or a replay
file) cannot be written as UTF-8 and would end the command with UnicodeEncodeError; it becomes
U+FFFD (`utf8_safe`).

Only the standard library is imported here.
"""
from __future__ import annotations

import json
import re

__all__ = ["clean_text", "clean_line", "json_line", "utf8_safe", "StreamCleaner"]

# ECMA-48: CSI ESC [ params intermediates final; OSC/DCS/SOS/PM/APC strings end at BEL or ST
# (ESC \ or 0x9c); two-character escapes ESC X. The 8-bit forms (0x9b CSI, 0x9d OSC, ...) too.
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"                       # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC DCS SOS PM APC
    r"|\x1b[ -/]*[0-~]"                                      # other escapes (ESC c: full reset, ...)
)
# the start of a sequence that the next chunk may complete, at the very end of the text
_PARTIAL = re.compile(
    r"(?:(?:\x1b\[|\x9b)[0-?]*[ -/]*"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*\x1b?"
    r"|\x1b[ -/]*|\r)\Z")
MAX_HELD = 4096
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it can always be written as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)


def clean_text(text: str) -> str:
    """`text` without terminal control sequences or control characters (newline and tab kept;
    CR LF becomes LF, any other CR is dropped; lone surrogates become U+FFFD)."""
    text = _SEQUENCES.sub("", text.replace("\r\n", "\n"))
    return utf8_safe(_CONTROLS.sub("", text))


def clean_line(text: str) -> str:
    """`clean_text` on one line: newlines and tabs become spaces."""
    return clean_text(text).replace("\n", " ").replace("\t", " ")


def json_line(obj: object) -> str:
    """One JSON object on one line, non-ASCII kept readable but every control character escaped
    (json escapes C0 itself; DEL, C1 and the JS line separators are escaped here); lone
    surrogates become U+FFFD."""
    text = utf8_safe(json.dumps(obj, ensure_ascii=False, default=str))
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class StreamCleaner:
    """`clean_text` for text that arrives in chunks: a sequence cut by a chunk boundary is held
    back (up to MAX_HELD characters) until the next chunk completes it, so it is removed whole
    instead of leaving its payload on screen. `flush()` returns what is held, cleaned."""

    def __init__(self) -> None:
        self.held = ""

    def feed(self, chunk: str) -> str:
        text = self.held + chunk
        m = _PARTIAL.search(text)
        if m is not None and len(text) - m.start() <= MAX_HELD:
            text, self.held = text[:m.start()], text[m.start():]
        else:
            self.held = ""
        return clean_text(text)

    def flush(self) -> str:
        text, self.held = self.held, ""
        return clean_text(text)
