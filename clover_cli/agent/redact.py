"""The API key never appears in what Clover prints or writes (docs/security.md, "Redaction").

A server may put the key it was sent into an error (`invalid api key: Bearer sk-...`) or echo it
in its answer. The backend registers its key here (`register`); from then on

* `scrub(text)` replaces every registered value (and its JSON-escaped spelling) with REDACTED:
  the session writer (session.py) and BackendError's text (backends/base.py) call it;
* sys.stdout and sys.stderr are wrapped (`guard_streams`) so that whatever is written through
  them (`clover run`'s text and `--json` lines, click's messages, warnings) is scrubbed too,
  also when the key arrives split over several writes (a streamed answer): a tail that could be
  the start of a key is held back until the next write shows it is not, or until exit.

Bytes written to `.buffer` or to file descriptors directly are not covered; nothing in Clover
writes model or server text that way. Standard library only.
"""
from __future__ import annotations

import atexit
import json
import sys
import threading
from typing import Any, TextIO

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
