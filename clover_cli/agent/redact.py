"""The API key never appears in what Clover prints or writes (docs/security.md, "Redaction").

A server may put the key it was sent into an error (`invalid api key: Bearer sk-...`) or echo it
in its answer. The backend registers its key here (`register`); from then on

* `scrub(text)` replaces every registered value (and its JSON-escaped spelling) with REDACTED:
  the session writer (session.py) and BackendError's text (backends/base.py) call it;
* sys.stdout and sys.stderr are wrapped (`guard_streams`) so that whatever is written through
  them (`clover run`'s text and `--json` lines, click's messages, warnings) is scrubbed too,
  also when the key arrives split over several writes (a streamed answer): a tail that could be
  the start of a key is held back until the next write shows it is not, or until exit.

* the agent's events are scrubbed on their way to a front end that draws them itself (`clover
  acp`'s protocol stream, the TUI): `EventRedactor` / `redact_events` scrub every text field and
  hold back, across streamed BlockText events, a tail that could start a key;
* `clover acp` also scrubs each protocol message it writes (`scrub_writes`), errors included.

Bytes written to `.buffer` or to file descriptors directly are not covered otherwise. Standard
library only.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import sys
import threading
from typing import Any, Iterable, Iterator, TextIO

REDACTED = "[REDACTED]"
MIN_LEN = 8  # shorter "keys" ("none", "x") would blank ordinary words

_lock = threading.Lock()
_values: list[str] = []  # longest first, so a longer spelling is replaced before its parts


def register(value: str | None) -> None:
    """Treats `value` (an API key; ignored when shorter than MIN_LEN) as a secret from now on,
    and wraps sys.stdout/sys.stderr so that nothing printed shows it."""
    value = (value or "").strip()
    if len(value) < MIN_LEN:
        return
    with _lock:
        for spelling in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
            if spelling not in _values:
                _values.append(spelling)
        _values.sort(key=len, reverse=True)
    guard_streams()


def secrets() -> tuple[str, ...]:
    """The registered values (and spellings), longest first."""
    with _lock:
        return tuple(_values)


def scrub(text: Any) -> Any:
    """`text` with every registered secret replaced by REDACTED (non-strings are returned as
    they are)."""
    if not isinstance(text, str):
        return text
    for value in secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def _held_tail(text: str, values: tuple[str, ...]) -> int:
    """How many characters at the end of `text` could begin a secret (to hold back)."""
    best = 0
    for value in values:
        for k in range(min(len(text), len(value) - 1), best, -1):
            if value.startswith(text[-k:]):
                best = k
                break
    return best


class RedactingStream:
    """A text stream that scrubs what goes through it before the wrapped stream sees it."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._pending = ""
        self._wlock = threading.Lock()

    def write(self, text: str) -> int:
        """Writes `text` scrubbed; a tail that may start a secret waits for the next write."""
        values = secrets()
        with self._wlock:
            buf = scrub(self._pending + text)
            keep = _held_tail(buf, values)
            self._pending = buf[len(buf) - keep:] if keep else ""
            out = buf[:len(buf) - keep] if keep else buf
            if out:
                self._inner.write(out)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flushes the wrapped stream; a held tail stays held (it may be half a key)."""
        self._inner.flush()

    def release(self) -> None:
        """Writes out whatever is held (at exit: no more text can complete a secret)."""
        with self._wlock:
            pending, self._pending = self._pending, ""
        if pending:
            try:
                self._inner.write(scrub(pending))
                self._inner.flush()
            except (OSError, ValueError):
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard_streams() -> None:
    """Wraps sys.stdout and sys.stderr in RedactingStream (once each)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            wrapped = RedactingStream(stream)
            setattr(sys, name, wrapped)
            atexit.register(wrapped.release)


def scrub_value(value: Any) -> Any:
    """`value` with every string in it scrubbed: strings, and the strings inside dicts, lists and
    tuples (a tool call's arguments); anything else as it is."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_value(k): scrub_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_value(v) for v in value)
    return value


def scrub_event(event: Any) -> Any:
    """An agent event (a frozen dataclass, clover_cli/agent/events.py) with its text fields
    scrubbed; the same object when nothing in it is secret (an approval's future stays the one
    the agent waits on)."""
    if not secrets() or not dataclasses.is_dataclass(event):
        return event
    changes = {}
    for f in dataclasses.fields(event):
        old = getattr(event, f.name)
        if isinstance(old, (str, dict, list, tuple)) or hasattr(old, "items"):
            new = scrub_value(dict(old) if hasattr(old, "items") and not isinstance(old, dict) else old)
            if new != old:
                changes[f.name] = new
    return dataclasses.replace(event, **changes) if changes else event


class EventRedactor:
    """Scrubs a turn's events for a front end (docs/security.md, "Redaction"). A key a server
    echoes split over streamed BlockText events is caught: the tail of the text that could start
    a key is held back until the next BlockText shows it does not; any other event first releases
    what is held (scrubbed), so the text stays in order."""

    def __init__(self) -> None:
        self._held = ""
        self._last: Any = None  # the BlockText whose tail is held (its index and kind)

    def feed(self, event: Any) -> list:
        """The events to show for `event`, in order (none while a possible key is incomplete)."""
        values = secrets()
        if not values:
            return self.release() + [event]
        if type(event).__name__ == "BlockText":
            if self._last is not None and self._last.kind != event.kind:  # answer, thinking, call (markup.py)
                out = self.release()
            else:
                out = []
            text = scrub(self._held + event.text)
            keep = _held_tail(text, values)
            self._held, self._last = (text[len(text) - keep:], event) if keep else ("", None)
            shown = text[:len(text) - keep]
            if shown:
                out.append(dataclasses.replace(event, text=shown))
            return out
        return self.release() + [scrub_event(event)]

    def release(self) -> list:
        """The held text as one BlockText (scrubbed), or nothing."""
        held, last = self._held, self._last
        self._held, self._last = "", None
        return [dataclasses.replace(last, text=scrub(held))] if held and last is not None else []


def redact_events(events: Iterable) -> Iterator:
    """`events` (an agent turn) scrubbed through one EventRedactor; what is held is released when
    the turn ends."""
    redactor = EventRedactor()
    for event in events:
        yield from redactor.feed(event)
    yield from redactor.release()


def scrub_writes(writer: Any) -> Any:
    """`writer` (an asyncio StreamWriter: `clover acp`'s protocol stream) with its `write`
    scrubbing each message (UTF-8 bytes, JSON-escaped spellings included) before it is sent: the
    last line of defence, for errors and anything else not made from events. Returns `writer`."""
    inner = writer.write

    def write(data: bytes) -> None:
        if secrets():
            text = bytes(data).decode("utf-8", "surrogateescape")
            clean = scrub(text)
            if clean != text:
                data = clean.encode("utf-8", "surrogateescape")
        inner(data)

    writer.write = write
    return writer
