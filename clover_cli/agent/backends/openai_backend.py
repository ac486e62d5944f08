"""`openai:BASE_URL#MODEL`: an OpenAI-compatible chat-completions server (vLLM, SGLang, hosted APIs).

Standard library only (http.client). Requests stream (`stream: true`, server-sent events) and send
the tool schemas as `tools`; streamed `tool_calls` deltas are assembled into NativeToolCalls, and
when the server returns plain text the agent parses the call markup as for any model. Refused
connections, 4xx, 5xx and timeouts become one-line BackendErrors; 429 and 5xx are retried with
exponential backoff (honouring Retry-After) before any output has streamed.
"""
from __future__ import annotations

import http.client
import json
import os
import queue
import socket
import threading
import time
import urllib.parse
from typing import Any, Iterator

from clover_cli.agent.backends.base import (BackendError, Completion, ModelBackend, NativeToolCall,
                                            StreamItem, ThinkSplitter, block_texts)
from clover_cli.agent.events import BlockText
from clover_cli.agent.queues import STOPPED, next_item
from clover_cli.agent.parsing import has_open_call, parse_tool_calls, split_thinking

_EOF = object()
_CANCELLED = object()


class OpenAIBackend(ModelBackend):
    """Streams chat completions from a remote server."""

    native_tools = True

    def __init__(self, base_url: str, model: str, threshold: float = 0.95, api_key: str | None = None,
                 api_key_env: str | None = None, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 1.0, context_window: int = 32768, temperature: float | None = None,
                 **_: object) -> None:
        super().__init__(threshold)
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(f"bad server URL {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{model} @ {self.base_url}"
        self._parts = parts
        env = api_key_env or "OPENAI_API_KEY"
        if api_key_env and not os.environ.get(api_key_env) and api_key is None:
            raise BackendError(f"environment variable {api_key_env} (--api-key-env) is not set")
        self.api_key = api_key if api_key is not None else os.environ.get(env, "")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.context_window = int(context_window)
        self.temperature = temperature

    # -- request -------------------------------------------------------------------------------
    def request_body(self, messages: list[dict], tools: list[dict], max_new_tokens: int) -> dict:
        """The JSON body of one chat-completions request."""
        body: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages),
                                "stream": True, "max_tokens": max_new_tokens}
        if tools:
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        return cls(self._parts.hostname, self._parts.port, timeout=self.timeout)

    def _open(self, body: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """POSTs the request; retries 429/5xx and connection resets with backoff."""
        path = (self._parts.path.rstrip("/") or "") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            conn = self._connect()
            try:
                conn.request("POST", path, body=data, headers=headers)
                resp = conn.getresponse()
            except ConnectionRefusedError:
                conn.close()
                raise BackendError(f"cannot reach {self.base_url}: connection refused") from None
            except (socket.timeout, TimeoutError):
                conn.close()
                raise BackendError(f"{self.base_url} did not answer within {self.timeout:g} s") from None
            except OSError as e:
                conn.close()
                last = f"cannot reach {self.base_url}: {e.strerror or e}"
                if attempt < self.retries:
                    time.sleep(self.backoff * 2 ** attempt)
                    continue
                raise BackendError(last) from None
            if resp.status == 200:
                return conn, resp
            detail = _error_detail(resp)
            conn.close()
            last = f"{self.base_url} returned HTTP {resp.status}{': ' + detail if detail else ''}"
            if (resp.status == 429 or resp.status >= 500) and attempt < self.retries:
                wait = self.backoff * 2 ** attempt
                retry_after = resp.getheader("Retry-After")
                if retry_after and retry_after.strip().isdigit():
                    wait = min(float(retry_after), 60.0)
                time.sleep(wait)
                continue
            raise BackendError(last)
        raise BackendError(last)

    # -- answers --------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The chat-completions URL requests go to (named in error messages)."""
        return self.base_url + "/chat/completions"

    def _answer_kind(self, resp: http.client.HTTPResponse) -> str:
        """"sse" or "json" for a 200 answer; anything else is a BackendError naming the URL."""
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if ctype == "text/event-stream":
            return "sse"
        if ctype == "application/json" or ctype.endswith("+json"):
            return "json"
        head = b""
        if ctype in ("", "text/plain", "application/octet-stream", "application/x-ndjson"):
            try:  # some servers send SSE or JSON without the right type: look at the first bytes
                head = resp.peek(256)[:256].lstrip()
            except (OSError, ValueError, http.client.HTTPException):
                head = b""
            if head.startswith((b"data:", b"event:", b":")):
                return "sse"
            if head.startswith(b"{"):
                return "json"
        else:
            try:
                head = resp.read(200)
            except (OSError, ValueError, http.client.HTTPException):
                head = b""
        began = " ".join(head.decode("utf-8", "replace").split())[:80]
        raise BackendError(f"openai: {self.endpoint} answered 200 {ctype or 'without a Content-Type'}, "
                           f"not an event stream — is BASE_URL right (it usually ends in /v1)?"
                           + (f" It began: {began!r}" if began else ""))

    def stream(self, messages: list[dict], tools: list[dict], *, max_new_tokens: int = 2048,
               cancel: threading.Event | None = None) -> Iterator[StreamItem]:
        start = time.perf_counter()
        conn, resp = self._open(self.request_body(messages, tools, max_new_tokens))
        try:
            kind = self._answer_kind(resp)
            if kind == "json":  # the server ignored stream: true and sent one completion
                body = self._read_json(resp, cancel)
                conn.close()
                if body is _CANCELLED:
                    yield Completion("", "cancelled", stats=self._stats(start, "", 0, {}))
                    return
                yield from self._json_completion(body, start)
                return
            yield from self._sse(resp, start, cancel)
        finally:
            conn.close()

    def _read_json(self, resp: http.client.HTTPResponse, cancel: threading.Event | None) -> Any:
        """The whole JSON body (read by a thread, so a cancel is honoured while it arrives)."""
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_read_lines, args=(resp, lines), daemon=True).start()
        parts: list[str] = []
        while True:
            line = next_item(lines, lambda: cancel is not None and cancel.is_set())
            if line is STOPPED:
                return _CANCELLED
            if line is _EOF:
                break
            if isinstance(line, (socket.timeout, TimeoutError)):
                raise BackendError(f"openai: {self.endpoint} did not finish its answer within {self.timeout:g} s")
            if isinstance(line, BaseException):
                raise BackendError(f"openai: the answer from {self.endpoint} broke: {line}")
            parts.append(line)
        raw = "\n".join(parts)
        try:
            return json.loads(raw)
        except ValueError:
            raise BackendError(f"openai: {self.endpoint} answered 200 application/json that is not JSON: "
                               f"{_snippet(raw.encode())!r}") from None

    def _json_completion(self, body: Any, start: float) -> Iterator[StreamItem]:
        """A non-streamed chat completion ({"choices": [{"message": ...}]}) as stream items."""
        if isinstance(body, dict) and isinstance(body.get("error"), (dict, str)):
            err = body["error"]
            raise BackendError(f"openai: {self.endpoint} reported: {err.get('message', err) if isinstance(err, dict) else err}")
        choices = body.get("choices") if isinstance(body, dict) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise BackendError(f"openai: {self.endpoint} answered 200 JSON that is not a chat completion: "
                               f"{_snippet(json.dumps(body).encode())!r}")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            yield BlockText(reasoning, 0, thinking=True)
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        splitter = ThinkSplitter()
        yield from block_texts(splitter, text, 0, final=True)
        native = []
        for i, tc in enumerate(message.get("tool_calls") or []):
            if not isinstance(tc, dict):
                continue
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            args = fn.get("arguments", "")
            native.append(NativeToolCall(tc.get("id") or f"call_{i}", str(fn.get("name") or ""),
                                         args if isinstance(args, str) else json.dumps(args)))
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        yield Completion(text, choices[0].get("finish_reason") or "stop", tool_calls=tuple(native),
                         stats=self._stats(start, text, 1, usage))

    def _stats(self, start: float, text: str, chunks: int, usage: dict) -> dict:
        seconds = time.perf_counter() - start
        tokens = int(usage.get("completion_tokens") or 0) or max(chunks, len(text) // 4)
        return {"generated_tokens": tokens, "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                "forwards": chunks, "total_seconds": round(seconds, 4),
                "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0}

    def _sse(self, resp: http.client.HTTPResponse, start: float,
             cancel: threading.Event | None) -> Iterator[StreamItem]:
        """Reads a server-sent-event stream of chat-completion chunks."""
        lines: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(resp, lines), daemon=True)
        reader.start()
        splitter = ThinkSplitter()
        text, chunks, finish, usage = "", 0, "", {}
        done = False
        calls: dict[int, dict[str, str]] = {}
        last_data = time.monotonic()
        while True:
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
                break
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() - last_data > self.timeout:
                    raise BackendError(f"openai: {self.endpoint} stopped streaming for {self.timeout:g} s") from None
                continue
            last_data = time.monotonic()
            if line is _EOF:
                break
            if isinstance(line, BaseException):
                raise BackendError(f"openai: the stream from {self.endpoint} broke: {line}") from None
            if not line.startswith("data:"):
                continue  # blank lines, comments, event:/id: fields
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            try:
                event = json.loads(payload)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                raise BackendError(f"openai: {self.endpoint} sent an event that is not a JSON object: "
                                   f"{_snippet(payload.encode())!r}")
            if isinstance(event.get("error"), dict):
                raise BackendError(f"openai: {self.endpoint} reported: {event['error'].get('message', event['error'])}")
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning:
                    yield BlockText(reasoning, chunks, thinking=True)
                content = delta.get("content")
                if content:
                    text += content
                    yield from block_texts(splitter, content, chunks)
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(tc.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    slot["id"] = tc.get("id") or slot["id"]
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
                chunks += 1
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if finish != "cancelled" and not done and not finish:
            raise BackendError(f"openai: the stream from {self.endpoint} ended before the answer was complete "
                               f"(no finish_reason and no [DONE] after {chunks} chunk(s))")
        yield from block_texts(splitter, "", chunks, final=True)
        native = tuple(NativeToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"])
                       for i, c in sorted(calls.items()))
        yield Completion(text, finish or "stop", tool_calls=native, stats=self._stats(start, text, chunks, usage))


def _snippet(raw: bytes, limit: int = 120) -> str:
    return " ".join(raw.decode("utf-8", "replace").split())[:limit]


def _read_lines(resp: http.client.HTTPResponse, out: queue.Queue) -> None:
    try:
        while True:
            raw = resp.readline()
            if not raw:
                break
            out.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
    except (OSError, ValueError, http.client.HTTPException) as e:
        out.put(e)
        return
    out.put(_EOF)


def _error_detail(resp: http.client.HTTPResponse) -> str:
    """The server's error message, one line."""
    try:
        raw = resp.read(4096).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", "") if isinstance(err, dict) else str(err)
    except ValueError:
        msg = raw
    return " ".join(str(msg).split())[:300]


def to_openai_messages(messages: list[dict]) -> list[dict]:
    """Canonical messages -> the chat-completions wire format (arguments as JSON strings; call
    markup the model wrote as text is sent as native tool_calls so every server accepts it)."""
    out = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            content = split_thinking(m.get("content") or "")[1].strip()
            msg: dict[str, Any] = {"role": "assistant"}
            if m.get("tool_calls"):
                if has_open_call(content):
                    content = parse_tool_calls(content).text
                msg["tool_calls"] = [{"id": tc["id"], "type": "function",
                                      "function": {"name": tc["function"]["name"],
                                                   "arguments": _args_json(tc["function"].get("arguments"))}}
                                     for tc in m["tool_calls"]]
            msg["content"] = content or None
            out.append(msg)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m.get("tool_call_id", ""), "content": m.get("content") or ""})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return out


def _args_json(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
