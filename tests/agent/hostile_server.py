"""A hostile OpenAI-compatible server on 127.0.0.1: answers that never end, headers one byte at a
time, a gzip bomb, huge bodies, lines and `/v1/models` replies, long Retry-After waits. It
writes raw bytes on the socket (no HTTP library shapes what it sends) and stops itself: every
answer ends after SECONDS or MAX_BYTES, whichever comes first, or when the client goes away;
`sent` counts the bytes the client let it write."""
from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from typing import Callable, Iterator

SECONDS = 300.0  # a backstop above the client's deadlines (tests/agent/test_openai_bounds.py)
MAX_BYTES = 2 << 30
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _event(delta: dict) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n"


def _repeat(piece: bytes, times: int = 1) -> Iterator[bytes]:
    batch = piece * max(1, (64 * 1024) // len(piece)) * times
    while True:
        yield batch


def _endless(delta: dict) -> Iterator[bytes]:
    yield SSE_HEAD
    yield from _repeat(_event(delta))


def _endless_calls() -> Iterator[bytes]:
    yield SSE_HEAD
    index = 0
    while True:
        yield b"".join(_event({"tool_calls": [{"index": index + k, "id": f"c{index + k}", "type": "function",
                                                "function": {"name": "read_file", "arguments": "{}"}}]})
                       for k in range(100))
        index += 100


def _endless_args() -> Iterator[bytes]:
    yield SSE_HEAD
    yield _event({"tool_calls": [{"index": 0, "id": "c0", "type": "function",
                                  "function": {"name": "write_file", "arguments": "{\"content\": \""}}]})
    yield from _repeat(_event({"tool_calls": [{"index": 0, "function": {"arguments": "x" * 4000}}]}))


def _slow(first: bytes, then: bytes, every: float) -> Iterator[bytes | float]:
    yield first
    while True:
        yield every
        yield then


def _gzip_bomb() -> Iterator[bytes]:
    """1.5 GB of SSE text once decompressed (1.5 MB on the wire): full-flush blocks repeated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = (b": " + b"0" * 1021 + b"\n") * 1024  # 1 MiB of comment lines
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    body = first + again * 1500
    yield (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
    for i in range(0, len(body), 64 * 1024):
        yield body[i:i + 64 * 1024]


def _sized(head: bytes, size: int, open_: bytes = b"", fill: bytes = b"x", close: bytes = b"") -> Iterator[bytes]:
    """`head` then a body of `size` bytes: `open_`, `fill` repeated, `close` (Content-Length set)."""
    yield head % (size + len(open_) + len(close))
    yield open_
    left = size
    chunk = fill * (1 << 20)
    while left > 0:
        yield chunk[:left]
        left -= len(chunk)
    yield close


JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
ERROR_HEAD = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n")
SSE_SIZED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"


def _short_answer() -> Iterator[bytes]:
    yield SSE_HEAD
    yield _event({"content": "ok"})
    yield b"data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _busy(seconds: int) -> Iterator[bytes]:
    body = b'{"error": {"message": "busy"}}'
    yield (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: %d\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (seconds, len(body), body))


BEHAVIOURS: dict[str, Callable[[], Iterator]] = {
    "endless_content": lambda: _endless({"content": "y" * 4000}),
    "endless_reasoning": lambda: _endless({"reasoning_content": "r" * 4000}),
    "endless_args": _endless_args,
    "endless_calls": _endless_calls,
    "endless_comments": lambda: (x for part in ([SSE_HEAD], _repeat(b": keep-alive\n")) for x in part),
    "endless_blank_lines": lambda: (x for part in ([SSE_HEAD], _repeat(b"\n")) for x in part),
    "slow_blank_lines": lambda: _slow(SSE_HEAD, b"\n", 0.3),
    "slow_headers": lambda: _slow(b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a", 0.7),
    "gzip_bomb": _gzip_bomb,
    "long_line": lambda: _sized(SSE_SIZED, 50 << 20, b"data: "),
    "huge_json": lambda: _sized(JSON_HEAD, 50 << 20, b'{"choices": [{"message": {"content": "', b"x",
                                b'"}, "finish_reason": "stop"}]}'),
    "retry_after_hour": lambda: _busy(3600),
    "huge_error": lambda: _sized(ERROR_HEAD, 50 << 20, b'{"error": {"message": "', b"e", b'"}}'),
    "short": _short_answer,
}


class HostileServer:
    """Serves `behaviour` to every POST; GET /v1/models gets a `models_bytes` reply (padded JSON,
    0: 404) and then the chat answers. `posts` counts the POSTs; `busy_first` answers the first
    that many POSTs 429 with Retry-After: 1 before the behaviour."""

    def __init__(self, behaviour: str, models_bytes: int = 0, busy_first: int = 0) -> None:
        self.behaviour, self.models_bytes, self.busy_first = behaviour, models_bytes, busy_first
        self.sent = 0
        self.posts = 0
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _request(self, conn: socket.socket) -> str:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return ""
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                break
            body += more
        return head.split(b" ")[0].decode() + " " + head.split(b" ")[1].decode()

    def _answer(self, request: str) -> Iterator:
        if request.startswith("GET") and request.endswith("/models") and self.models_bytes:
            return _sized(JSON_HEAD, self.models_bytes, b'{"object": "list", "data": [], "pad": "', b"p", b'"}')
        if request.startswith("GET"):
            return iter([b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"])
        self.posts += 1
        if self.posts <= self.busy_first:
            return _busy(1)
        return BEHAVIOURS[self.behaviour]()

    def _serve(self, conn: socket.socket) -> None:
        began = time.monotonic()
        with conn:
            try:
                request = self._request(conn)
                if not request:
                    return
                for piece in self._answer(request):
                    if self._stop.is_set() or time.monotonic() - began > SECONDS or self.sent > MAX_BYTES:
                        return
                    if isinstance(piece, float):
                        self._stop.wait(piece)
                        continue
                    conn.sendall(piece)
                    self.sent += len(piece)
            except OSError:  # the client went away: what it read is what `sent` says
                return

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "HostileServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
