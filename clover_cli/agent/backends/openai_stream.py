"""Reading one chat-completions answer: the lines of the response body (read by a thread, so a
cancel or a stalled server never blocks the agent), then server-sent events or one JSON body
turned into our stream items.

The reader thread never prints: whatever the transport raises while it reads (including after
the response was closed under it on a cancel) is handed over as an item or dropped, so no
"Exception in thread" ever reaches the terminal.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from clover_cli.agent.backends.base import BackendError, BlockText, NativeToolCall
from clover_cli.agent.markup import MarkupSplitter, block_texts

EOF_ITEM = object()
STOPPED = object()


class LineReader:
    """The body's lines from a thread; `get` waits for the next one or a stop."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._q: queue.Queue = queue.Queue()
        self._pushed: list[Any] = []
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(lines,), name="clover-openai-read",
                                        daemon=True)
        self._thread.start()

    def _run(self, lines: Iterable[str]) -> None:
        try:
            for line in lines:
                if self.closed.is_set():
                    return
                self._q.put(line)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, never printed here
            if not self.closed.is_set():
                self._q.put(e)
            return
        self._q.put(EOF_ITEM)

    def push_back(self, item: Any) -> None:
        self._pushed.append(item)

    def get(self, stop: Callable[[], bool], timeout: float) -> Any:
        """The next line, EOF_ITEM, an exception the read raised, STOPPED when stop() became
        true, or a TimeoutError when nothing came for `timeout` seconds."""
        if self._pushed:
            return self._pushed.pop()
        waited = time.monotonic()
        while True:
            if stop():
                return STOPPED
            try:
                return self._q.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() - waited > timeout:
                    return TimeoutError()

    def close(self) -> None:
        self.closed.set()


def answer_kind(ctype: str, lines: LineReader, stopped: Callable[[], bool], wait: float, endpoint: str) -> str:
    """"sse" or "json" for a 200 answer of Content-Type `ctype` (sniffed from its first line when
    the type says nothing); anything else is a BackendError naming the URL."""
    if ctype == "text/event-stream":
        return "sse"
    if ctype == "application/json" or ctype.endswith("+json"):
        return "json"
    head = ""
    first = lines.get(stopped, wait)
    while isinstance(first, str) and not first.strip():
        first = lines.get(stopped, wait)
    if isinstance(first, str):
        lines.push_back(first)
        head = first.lstrip()
    if ctype in ("", "text/plain", "application/octet-stream", "application/x-ndjson"):
        if head.startswith(("data:", "event:", ":")):
            return "sse"
        if head.startswith("{"):
            return "json"
    from clover_cli.agent.backends.openai_wire import snippet
    began = snippet(head, 80)
    raise BackendError(f"openai: {endpoint} answered 200 {ctype or 'without a Content-Type'}, "
                       f"not an event stream — is BASE_URL right (it usually ends in /v1)?"
                       + (f" It began: {began!r}" if began else ""))


class SseFields:
    """Server-sent-event lines -> ("data", payload), ("error", payload) or ("", "") for a line
    that carries neither. An error comes as llama-server's own `error: {...}` field
    (tools/server, server_sent_event(sink, "error", ...)) or as the data of an `event: error`."""

    def __init__(self) -> None:
        self.event = ""

    def read(self, line: str) -> tuple[str, str]:
        if line.startswith("error:"):
            return "error", line[6:].strip()
        if line.startswith("event:"):
            self.event = line[6:].strip()
        if not line.startswith("data:"):
            if not line.strip():
                self.event = ""  # a blank line ends the event
            return "", ""
        return ("error" if self.event == "error" else "data"), line[5:].strip()


def completion_stats(start: float, text: str, chunks: int, usage: dict) -> dict:
    """The stats of a completion that began at perf_counter() `start` (usage: the server's)."""
    seconds = time.perf_counter() - start
    tokens = int(usage.get("completion_tokens") or 0) or max(chunks, len(text) // 4)
    return {"generated_tokens": tokens, "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "forwards": chunks, "total_seconds": round(seconds, 4),
            "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0}


class Assembler:
    """Chat-completion chunks -> BlockText items and, at the end, the text, calls and usage."""

    def __init__(self) -> None:
        self.splitter = MarkupSplitter()
        self._parts: list[str] = []  # the text so far, joined when asked (`+=` on an attribute copies)
        self.chunks = 0
        self.finish = ""
        self.usage: dict = {}
        self.calls: dict[int, dict[str, str]] = {}
        self._args: dict[int, list[str]] = {}  # argument fragments not yet joined into self.calls
        self.output = False  # anything streamed yet (after that a retry would repeat it)
        self.fingerprint = ""  # the chunks' system_fingerprint (Ollama: "fp_ollama")
        self.size = 0  # characters of text, reasoning and call arguments so far (OUTPUT_CHARS)

    @property
    def text(self) -> str:
        """The answer's text so far."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _grow(self, n: int) -> None:
        from clover_cli.agent.backends.openai_limits import MAX_CALLS, OUTPUT_CHARS, AnswerTooLarge

        self.size += n
        if self.size > OUTPUT_CHARS:
            raise AnswerTooLarge(f"the answer went over {OUTPUT_CHARS:,} characters of text, reasoning "
                                 "and tool-call arguments")
        if len(self.calls) > MAX_CALLS:
            raise AnswerTooLarge(f"the answer holds over {MAX_CALLS} tool calls")

    def feed(self, event: dict) -> Iterator[BlockText]:
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        if isinstance(event.get("system_fingerprint"), str):
            self.fingerprint = event["system_fingerprint"]
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                delta = {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._grow(len(reasoning))
                self.output = True
                yield BlockText(reasoning, self.chunks, thinking=True)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._grow(len(content))
                self.output = True
                self._parts.append(content)
                yield from block_texts(self.splitter, content, self.chunks)
            for position, tc in enumerate(delta.get("tool_calls") or []):
                if not isinstance(tc, dict):
                    continue
                self.output = True
                key = self._slot_of(tc, position)
                slot = self.calls.setdefault(key, {"id": "", "name": "", "arguments": ""})
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                slot["id"] = tc.get("id") or slot["id"]
                name = fn.get("name") or ""
                if name != slot["name"]:  # llama-cpp-python repeats the whole name in every chunk
                    slot["name"] += name
                args = fn.get("arguments")
                if isinstance(args, dict):  # an object, not its JSON text
                    args = json.dumps(args)
                self._grow(len(args) + len(name) + 1 if isinstance(args, str) else len(name) + 1)
                if isinstance(args, str) and args:
                    self._args.setdefault(key, []).append(args)
            self.chunks += 1
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])

    def _slot_of(self, tc: dict, position: int) -> int:
        """The call a `tool_calls` delta continues. With `index` (every documented server) that
        is it; without, a call whose id it repeats, a new call when it brings a new id or is a
        second call in the same delta, else the last call (an arguments fragment)."""
        index = tc.get("index")
        if type(index) is int:
            return index
        call_id = tc.get("id")
        if call_id:
            for key, slot in self.calls.items():
                if slot["id"] == call_id:
                    return key
        if call_id or position > 0 or not self.calls:
            return max(self.calls, default=-1) + 1
        return max(self.calls)

    def tail(self) -> list[BlockText]:
        return block_texts(self.splitter, "", self.chunks, final=True)

    def call_dicts(self) -> list[dict[str, str]]:
        """The calls so far, in order: {"id", "name", "arguments"}."""
        for key, parts in self._args.items():
            self.calls[key]["arguments"] += "".join(parts)
        self._args.clear()
        return [dict(c) for _, c in sorted(self.calls.items())]

    def native(self) -> tuple[NativeToolCall, ...]:
        self.call_dicts()
        return tuple(NativeToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"])
                     for i, c in sorted(self.calls.items()))


def parse_json_completion(body: Any, endpoint: str) -> tuple[str, str, str, tuple[NativeToolCall, ...], dict]:
    """(reasoning, text, finish_reason, calls, usage) of a non-streamed chat completion."""
    if isinstance(body, dict) and isinstance(body.get("error"), (dict, str)):
        err = body["error"]
        raise BackendError(f"openai: {endpoint} reported: {err.get('message', err) if isinstance(err, dict) else err}")
    choices = body.get("choices") if isinstance(body, dict) else None
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        from clover_cli.agent.backends.openai_wire import snippet
        raise BackendError(f"openai: {endpoint} answered 200 JSON that is not a chat completion: "
                           f"{snippet(json.dumps(body))!r}")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    native = []
    for i, tc in enumerate(message.get("tool_calls") or []):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        args = fn.get("arguments", "")
        native.append(NativeToolCall(tc.get("id") or f"call_{i}", str(fn.get("name") or ""),
                                     args if isinstance(args, str) else json.dumps(args)))
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return (reasoning if isinstance(reasoning, str) else "", text,
            str(choices[0].get("finish_reason") or "stop"), tuple(native), usage)
