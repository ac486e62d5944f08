"""Every read from an OpenAI-compatible server is bounded in bytes and in time (docs/agent.md,
"Bounds on a server's answers"):

- time: a request has a total deadline (`--request-timeout`, default REQUEST_TIMEOUT); its
  headers must all arrive within the idle timeout (headers sent one byte at a time never
  finish otherwise: each byte resets a per-read timeout); between two reads at most the idle
  timeout passes;
- bytes: at most HEAD_BYTES are read before the body (headers and an error body), at most
  ANSWER_BYTES of an answer's body on the wire and again after decompression (a gzip bomb),
  a line of at most LINE_BYTES, a non-streamed JSON answer of at most JSON_BYTES, a probe
  (`/v1/models`, `/props`) of at most PROBE_BYTES, and OUTPUT_CHARS of text, reasoning and
  tool-call arguments together (an endless answer).

The byte and time limits on the wire are kept by a network layer under the HTTP client (a
wrapped httpcore network backend): every socket read, in whichever thread, is charged to the
current request's Budget and given no more time than its deadline leaves. What broke a limit
is kept in `Budget.exceeded`, so the error names the limit, not the transport's symptom.
"""
from __future__ import annotations

import math
import re
import threading
import time
from typing import Any, Iterable, Iterator

MIB = 1024 * 1024
REQUEST_TIMEOUT = 900.0  # seconds for one request, headers to the last byte (a slow CPU server: 3 tokens/s x 2,048)
HEAD_BYTES = 1 * MIB
ANSWER_BYTES = 64 * MIB
LINE_BYTES = 8 * MIB
JSON_BYTES = 8 * MIB
PROBE_BYTES = 1 * MIB
OUTPUT_CHARS = 8 * MIB
MAX_CALLS = 256  # tool calls in one answer


_FILLER = re.compile(rb"(?:\r?\n|:[^\n]*\n)+")  # blank lines and SSE comments


class AnswerTooLarge(Exception):
    """An answer broke a byte or size limit; str() is one line naming it."""


class Budget:
    """The limits of the request in flight: a deadline and the bytes left to read. A backend
    has one and makes one request at a time (the agent's model calls, compaction's included,
    follow each other; the probes run before the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deadline = math.inf
        self.bytes_left = self.limit = math.inf
        self.what = ""  # "the headers", "the answer", ... (named when a limit breaks)
        self.exceeded = ""  # why the last read was refused, one line ("" while within limits)
        self._deadline_says = ""

    def phase(self, deadline: float, max_bytes: float, what: str, deadline_says: str) -> None:
        """A new phase of the request: until the monotonic time `deadline`, at most `max_bytes`
        more read; `what` and `deadline_says` name the phase and its deadline in errors."""
        with self._lock:
            self.deadline, self.bytes_left, self.limit, self.what = deadline, max_bytes, max_bytes, what
            self.exceeded, self._deadline_says = "", deadline_says

    def time_left(self) -> float:
        """Seconds until the deadline; 0 (and `exceeded` set) once it has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.exceeded = self.exceeded or self._deadline_says
            return 0.0
        return left

    def charge(self, n: int) -> None:
        """Count `n` bytes read; AnswerTooLarge once more came than the phase allows."""
        with self._lock:
            self.bytes_left -= n
            if self.bytes_left < 0:
                self.exceeded = self.exceeded or f"{self.what} went over {_size(self.limit)}"
                raise AnswerTooLarge(self.exceeded)


def _size(n: float) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{int(n):,} bytes"


class _Stream:
    """A network stream whose reads are charged to a Budget and end at its deadline."""

    def __init__(self, inner: Any, budget: Budget) -> None:
        self._inner, self._budget = inner, budget

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore2

        left = self._budget.time_left()
        if left <= 0:
            raise httpcore2.ReadTimeout(self._budget.exceeded)
        try:
            data = self._inner.read(max_bytes, left if timeout is None else min(timeout, left))
        except httpcore2.ReadTimeout:
            self._budget.time_left()  # names the deadline if that is what ran out
            raise
        try:
            self._budget.charge(len(data))
        except AnswerTooLarge as e:
            raise httpcore2.ReadError(str(e)) from None
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._budget)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """An httpcore network backend whose streams are bounded by `budget`."""

    def __init__(self, inner: Any, budget: Budget) -> None:
        self._inner, self._budget = inner, budget

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _Stream:
        return _Stream(self._inner.connect_tcp(*args, **kwargs), self._budget)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _Stream:
        return _Stream(self._inner.connect_unix_socket(*args, **kwargs), self._budget)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_http_client(timeout: float, budget: Budget) -> Any:
    """The SDK's default HTTP client (proxies from the environment, its connection limits) with
    every connection, direct or through a proxy, charged to `budget`."""
    import openai

    client = openai.DefaultHttpxClient(timeout=timeout)
    transports = [client._transport, *client._mounts.values()]  # the direct one and each proxy's
    for transport in filter(None, transports):  # None: a NO_PROXY host, served by the direct one
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if inner is None:
            raise RuntimeError("openai: this httpx version cannot bound reads (no network backend)")
        pool._network_backend = _Backend(inner, budget)
    return client


def bounded_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a body given as byte chunks (decompressed), "\\r\\n" or "\\n" ended, each at
    most LINE_BYTES and all together at most ANSWER_BYTES; AnswerTooLarge otherwise. A run of
    blank lines and `:` comments comes as one "" (or one ":" opening the body, which marks an
    event stream): millions of them cost one item, not millions."""
    pending = bytearray()
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > ANSWER_BYTES:
            raise AnswerTooLarge(f"the answer went over {_size(ANSWER_BYTES)} (after decompression)")
        start = 0
        while True:
            if not pending:  # at a line start: a run of blank and comment lines is read at once
                filler = _FILLER.match(chunk, start)
                if filler:
                    run = filler.group()
                    if run[:1] in (b"\n", b"\r") or b"\n\n" in run or b"\n\r\n" in run:
                        yield ""  # one blank line ends an event as well as many
                    elif start == 0 and total == len(chunk):
                        yield ":"  # the body begins with a comment: an event stream
                    start = filler.end()
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if len(pending) + len(piece) > LINE_BYTES:
                raise AnswerTooLarge(f"the answer holds a line of over {_size(LINE_BYTES)}")
            pending += piece
            if end < 0:
                break
            yield pending.rstrip(b"\r").decode("utf-8", "replace")
            pending.clear()
            start = end + 1
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", "replace")


def read_capped(chunks: Iterable[bytes], limit: int) -> bytes | None:
    """The whole body if it is at most `limit` bytes (decompressed), else None (read no further)."""
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            return None
    return bytes(out)
