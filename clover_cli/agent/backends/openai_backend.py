"""`openai:BASE_URL#MODEL`: an OpenAI-compatible chat-completions server (vLLM, SGLang,
llama.cpp, hosted APIs), through the official `openai` SDK (imported on first use, so
`clover --help` never loads it). The SDK does the transport: HTTP(S), `HTTPS_PROXY`/`NO_PROXY`,
timeouts, auth. Our own policy stays on top of it (docs/agent.md):

- Requests stream (`stream: true`, `stream_options.include_usage` for real token counts) and send
  the tool schemas as `tools` with `tool_choice: "auto"`; streamed `tool_calls` deltas become
  NativeToolCalls, whichever server dialect streams them (docs/agent.md, "Server dialects").
- 429, 5xx (but a 5xx listing validation errors), dropped connections, and an error event inside
  the stream before any output are retried with exponential backoff (honouring Retry-After);
  everything else is a one-line BackendError naming the URL and the cause (openai_errors.py); a
  connection dropped after output is AnswerCutOff, the answer so far kept. Why our reader and
  retries rather than the SDK's: openai_answers.py.
- The context window comes from `--context-window`/config (the agent's), else from the server
  (`/v1/models` `max_model_len`, llama.cpp `/props` `n_ctx`), else 32,768. The prompt is counted
  as the server counts it (openai_count.py); a 400 for length is read for the server's numbers,
  asked again at once when only `max_tokens` was too large, else a ContextOverflowError, so the
  agent fits the conversation by the new count and asks again; the same request is never resent.
- A server that refuses `tools`, whose chat template drops them (llama.cpp `/props`), or that
  cannot say whether it renders them (llama-cpp-python, known by `/v1/models`) gets the tools as
  text in the system prompt (the in-process models' format) after a one-time notice.
- Every read is bounded in bytes and time (openai_limits.py): a total deadline per request
  (`request_timeout`, `--request-timeout`), the idle `timeout` for the headers and between reads,
  and byte limits on headers, bodies, lines, probes and the answer's text.
- `finish_reason: "length"` is passed on (the agent ends the turn as truncated); native calls cut
  off by it are handed over as cut-off call markup, which the agent explains to the model.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import urllib.parse
from typing import Any, Iterator

from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend, StreamItem
from clover_cli.agent.backends.openai_answers import AnswerReader, Retry as _Retry
from clover_cli.agent.backends.openai_count import ServerCounting, request_chars
from clover_cli.agent.backends.openai_errors import is_validation_error, one_line as _one_line
from clover_cli.agent.backends.openai_limits import (ANSWER_BYTES, HEAD_BYTES, PROBE_BYTES, REQUEST_TIMEOUT,
                                                     Budget, bounded_http_client, read_capped)
from clover_cli.agent.backends.openai_stream import completion_stats
from clover_cli.agent.backends.openai_wire import (DROPS_TOOLS, all_json, cut_off_as_text, error_detail,
                                                   is_context_overflow, prompt_lacks_tools,
                                                   refuses_tool_choice, refuses_tools,
                                                   server_dialect, template_drops_tools,
                                                   to_openai_messages, tool_names, window_from_models,
                                                   window_from_props, wire_names)
from clover_cli.agent.backends.recoverable import ContextOverflowError
from clover_cli.agent.events import Notice
from clover_cli.engine.config import DEFAULT_THRESHOLD

__all__ = ["OpenAIBackend", "to_openai_messages"]
DEFAULT_WINDOW = 32768
PROBE_TIMEOUT = 3.0
MAX_RETRY_WAIT = 60.0  # the longest Retry-After honoured; a longer one fails at once, saying so


class OpenAIBackend(ServerCounting, AnswerReader, ModelBackend):
    """Streams chat completions from a remote server."""

    native_tools = True

    def __init__(self, base_url: str, model: str, threshold: float = DEFAULT_THRESHOLD, api_key: str | None = None,
                 api_key_env: str | None = None, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 1.0, context_window: int | None = None, temperature: float | None = 0.0,
                 probe: bool = True, request_timeout: float | None = None) -> None:
        super().__init__(threshold)
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(f"bad server URL {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"{model} @ {self.base_url}"
        env = api_key_env or "OPENAI_API_KEY"
        if api_key_env and not os.environ.get(api_key_env) and api_key is None:
            raise BackendError(f"environment variable {api_key_env} (--api-key-env) is not set")
        self.api_key = api_key if api_key is not None else os.environ.get(env, "")
        self._key_env = env  # named in the hint for an HTTP 401
        from clover_cli.agent.redact import register
        register(self.api_key)  # never printed or written, whatever the server echoes (redact.py)
        self.timeout = float(timeout)  # idle: for the headers, and between two reads of the answer
        self.request_timeout = float(request_timeout or REQUEST_TIMEOUT)  # one request, whole
        self._budget = Budget()  # the limits of the request in flight (openai_limits.py)
        self._counting_init()  # the prompt's tokens as the server counts them (openai_count.py)
        self._deadline = 0.0
        self.retries = int(retries)
        self.backoff = float(backoff)
        self._window = int(context_window) if context_window else None
        self._probe_wanted = probe  # the window (unless given) and the server's tool support
        self.dialect: str | None = None  # the server, where its answers tell (openai_wire.server_dialect)
        self._tool_choice = True  # sent with tools until a server refuses the field
        self._sent = (0, 0)  # characters of message text and of tool schemas in the last request
        self._size_checked = False  # the first answer's prompt count was compared with _sent
        self._probed = threading.Lock()
        self.temperature = temperature  # sent (greedy, as in-process, unless set); None: the server's
        self.text_tools = False  # tools go as text in the system prompt (server ignores `tools`)
        self._notices: list[str] = []
        self._client_obj: Any = None
        self._http: Any = None
        self._headers: dict = {}

    # -- the SDK client and what the server says about itself ------------------------------------
    def _client(self) -> Any:
        if self._client_obj is None:
            try:
                import openai
            except ImportError:  # pragma: no cover - a dependency; named if an install lacks it
                raise BackendError("openai: the `openai` package is not installed "
                                   "(pip install 'openai>=2,<4')") from None
            # no key: no Authorization header at all (local servers), as the SDK allows per request
            self._headers = {} if self.api_key else {"Authorization": openai.Omit()}
            self._http = bounded_http_client(self.timeout, self._budget)
            self._client_obj = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "none",
                                             timeout=self.timeout, max_retries=0, http_client=self._http)
        return self._client_obj

    @property
    def context_window(self) -> int:  # type: ignore[override]
        if self._window is None:
            self._probe()
        return self._window or DEFAULT_WINDOW

    @context_window.setter
    def context_window(self, value: int) -> None:
        self._window = int(value)

    def _get_json(self, url: str) -> Any:
        """GET a JSON document of at most PROBE_BYTES from the server within PROBE_TIMEOUT s, or
        None (a probe never fails a session)."""
        try:
            self._client()
            self._budget.phase(time.monotonic() + PROBE_TIMEOUT, HEAD_BYTES + PROBE_BYTES,
                               "the server's description of itself", f"{url} did not answer within {PROBE_TIMEOUT:g} s")
            with self._http.stream("GET", url, headers=self._key_header(), timeout=PROBE_TIMEOUT) as resp:
                raw = read_capped(resp.iter_bytes(), PROBE_BYTES) if resp.status_code == 200 else None
            return json.loads(raw) if raw is not None else None
        except Exception:  # noqa: BLE001 - any failure means "the server does not say"
            return None

    def _key_header(self) -> dict:
        """The Authorization header of a request outside the SDK (none without a key)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _probe(self) -> None:
        """Once: the context window and the chat template's tool support, where the server says."""
        with self._probed:
            if not self._probe_wanted:
                return
            self._probe_wanted = False
            models = self._get_json(self.base_url + "/models")
            named = server_dialect(models, None)  # a server its model list names has no /props
            props = self._get_json(self.root_url + "/props") if named in (None, "llama-server") else None
            window = window_from_models(models, self.model) or window_from_props(props)
            if window and self._window is None:
                self._window = window
            self.dialect = server_dialect(models, props)
            if template_drops_tools(props):
                self._use_text_tools("its chat template has no tools")
            elif self.dialect in DROPS_TOOLS:
                self._use_text_tools(f"it is {self.dialect}: {DROPS_TOOLS[self.dialect]}", "may ignore")

    def _use_text_tools(self, why: str, verb: str = "ignores") -> None:
        if not self.text_tools:
            self.text_tools = True
            self._notices.append(f"openai: {self.base_url} {verb} native tool calls ({why}); "
                                 "tools are described in the system prompt and called as text")

    # -- request -----------------------------------------------------------------------------------
    def wire_request(self, messages: list[dict], tools: list[dict]) -> tuple[list[dict], list[dict], dict]:
        """The messages and tool schemas as sent, and the wire name of each tool: tools as text
        where the server drops them, names in OpenAI's pattern (wire_names), roles alternating."""
        if self.text_tools and tools:
            from clover_cli.agent.render import flatten
            messages, tools = flatten(messages, tools), []
        names = wire_names(tool_names(messages, tools))
        return to_openai_messages(messages, names), [
            {**t, "function": {**t["function"], "name": names.get(t["function"]["name"], t["function"]["name"])}}
            if isinstance(t, dict) and isinstance(t.get("function"), dict) else t for t in tools], names

    def request_body(self, messages: list[dict], tools: list[dict], max_new_tokens: int) -> dict:
        """The JSON body of one chat-completions request; the answer's room (`max_tokens`) is
        what the window leaves the prompt, where the window is known (a server counts both)."""
        wire, wire_tools, names = self.wire_request(messages, tools)
        self._names_back = {w: name for name, w in names.items()}
        self._request_chars = request_chars(messages, tools)
        body: dict[str, Any] = {"model": self.model, "messages": wire, "stream": True,
                                "stream_options": {"include_usage": True},
                                "max_tokens": self._answer_room(messages, tools, max_new_tokens)}
        if wire_tools:
            if self._tool_choice:  # older vLLM read tools without it as tool_choice "none"
                body["tool_choice"] = "auto"
            body["tools"] = wire_tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        self._sent = (sum(len(str(m.get("content") or "")) for m in body["messages"]),
                      len(json.dumps(body["tools"])) if wire_tools else 0)
        return body

    @property
    def root_url(self) -> str:
        """The server's root (the base URL without `/v1`): llama.cpp's /props and /tokenize."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    @property
    def endpoint(self) -> str:
        """The chat-completions URL requests go to (named in error messages)."""
        return self.base_url + "/chat/completions"

    def _post(self, body: dict) -> Any:
        """The open streaming response for `body`; _Retry for what is worth another try."""
        import openai
        create = self._client().chat.completions.with_streaming_response.create
        fields = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        known = {k: fields.pop(k) for k in ("max_tokens", "tools", "tool_choice", "temperature", "stream_options")
                 if k in fields}
        self._limit_headers()
        try:
            manager = create(model=body["model"], messages=body["messages"], stream=True,
                             extra_body=fields or None, extra_headers=self._headers, **known)
            resp = manager.__enter__()
            self._budget.phase(self._deadline, ANSWER_BYTES, "the answer",
                               f"{self.endpoint} did not finish its answer within {self.request_timeout:g} s "
                               "(--request-timeout)")
            return resp
        except openai.APIStatusError as e:
            self._status_error(e, body)
        except openai.APITimeoutError:
            raise BackendError(f"openai: {self._budget.exceeded}" if self._budget.exceeded else
                               f"{self.base_url} did not answer within {self.timeout:g} s") from None
        except openai.APIConnectionError as e:
            if self._budget.exceeded:
                raise BackendError(f"openai: {self._budget.exceeded}") from None
            cause = _root_cause(e)
            if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
                raise BackendError(f"cannot reach {self.base_url}: connection refused") from None
            raise _Retry(f"cannot reach {self.base_url}: {_one_line(cause)}") from None
        except Exception as e:  # the SDK reading an error body lets the transport's error through
            if type(e).__module__.split(".")[0] != "httpx2":
                raise
            raise BackendError(f"openai: {self._budget.exceeded or _one_line(e) or type(e).__name__}") from None

    def _limit_headers(self) -> None:
        """The headers (and an error body) of the request about to be sent: HEAD_BYTES, within the
        idle timeout and the request's deadline."""
        headers_by = time.monotonic() + self.timeout
        if headers_by < self._deadline:
            self._budget.phase(headers_by, HEAD_BYTES, "the headers and error body",
                               f"{self.endpoint} did not answer within {self.timeout:g} s (its headers were not complete)")
        else:
            self._budget.phase(self._deadline, HEAD_BYTES, "the headers and error body",
                               f"{self.endpoint} did not answer within {self.request_timeout:g} s (--request-timeout)")

    def _status_error(self, e: Any, body: dict) -> None:
        status = int(e.status_code)
        try:
            raw = e.response.text
        except Exception:  # noqa: BLE001 - a streamed error body not read yet
            try:
                raw = e.response.read().decode("utf-8", "replace")
            except Exception:  # noqa: BLE001
                raw = ""
        detail = error_detail(raw) if raw else _one_line(getattr(e, "message", ""))
        msg = f"{self.base_url} returned HTTP {status}{': ' + detail if detail else ''}{self._hint(status)}"
        if is_context_overflow(status, detail):
            said, room_only = self._length_refused(detail, body)
            if room_only:  # the prompt fits: asked again at once, leaving the answer what is left
                raise _Retry(msg + said, wait=0.0, free=True) from None
            raise ContextOverflowError(msg + said) from None
        if body.get("tool_choice") and refuses_tool_choice(status, detail):
            self._tool_choice = False
            self._notices.append(f"openai: {self.base_url} refused `tool_choice` (HTTP {status}); "
                                 "asking again without it")
            raise _Retry(msg, wait=0.0) from None
        if body.get("tools") and refuses_tools(status, detail):
            self._use_text_tools(f"HTTP {status}: {detail[:80]}")
            raise _Retry(msg, wait=0.0) from None
        if is_validation_error(detail):  # llama-cpp-python answers 500 for a request it cannot read
            raise BackendError(msg) from None
        if status == 429 or status >= 500:
            after = e.response.headers.get("retry-after", "").strip()
            wait = float(after) if after.isdigit() else None
            if wait is not None and wait > MAX_RETRY_WAIT:
                raise BackendError(f"{msg} (it asks to wait {wait:g} s before trying again; Clover waits at most "
                                   f"{MAX_RETRY_WAIT:g} s: try again later)") from None
            raise _Retry(msg, wait) from None
        raise BackendError(msg) from None

    def _hint(self, status: int) -> str:
        """What to try for a 404 on a base URL without /v1, or a 401."""
        if status == 404 and not urllib.parse.urlsplit(self.base_url).path.rstrip("/").endswith("/v1"):
            return f" (did you mean {self.base_url}/v1?)"
        if status == 401 and self._key_env != "OPENAI_API_KEY":
            return f" (the key comes from {self._key_env}, named by --api-key-env)"
        if status == 401:
            return " (set the key in OPENAI_API_KEY, or name another variable with --api-key-env)"
        return ""

    # -- answers -----------------------------------------------------------------------------------
    def stream(self, messages: list[dict], tools: list[dict], *, max_new_tokens: int = 2048,
               cancel: threading.Event | None = None) -> Iterator[StreamItem]:
        start = time.perf_counter()
        stopped = (lambda: cancel.is_set()) if cancel is not None else (lambda: False)
        if self._probe_wanted:
            self._probe()
        attempt = 0
        while True:
            while self._notices:
                yield Notice(self._notices.pop(0))  # type: ignore[misc]
            body = self.request_body(messages, tools, max_new_tokens)
            self._check_not_refused(body)
            self._deadline = time.monotonic() + self.request_timeout
            try:
                resp = self._post(body)
                try:
                    yield from self._answer(resp, start, stopped)
                    return
                finally:
                    _close_quietly(resp)
            except _Retry as r:
                if r.free:
                    continue
                if attempt >= self.retries:
                    raise BackendError(r.message) from None
                wait = r.wait if r.wait is not None else self.backoff * 2 ** attempt
                attempt += 1
                if wait >= 1:  # a wait is said, never silent (a server's Retry-After included)
                    yield Notice(f"openai: {_one_line(r.message)}; trying again in {wait:g} s "  # type: ignore[misc]
                                 f"(retry {attempt} of {self.retries})")
                if cancel is not None and cancel.wait(wait):
                    yield Completion("", "cancelled", stats=completion_stats(start, "", 0, {}))
                    return
                if cancel is None:
                    time.sleep(wait)

    def _completion(self, text: str, finish: str, native: tuple, calls: list[dict], stats: dict,
                    fingerprint: str = "") -> Completion:
        if fingerprint == "fp_ollama":  # Ollama's chunks say so (openai/openai.go)
            self.dialect = self.dialect or "Ollama"
        self._check_prompt_size(int(stats.get("prompt_tokens") or 0))
        self._learn_usage(int(stats.get("prompt_tokens") or 0))
        back = getattr(self, "_names_back", {})  # the server names tools by their wire names
        native = tuple(dataclasses.replace(c, name=back.get(c.name, c.name)) for c in native)
        if finish == "length" and native and not all_json(native):
            return Completion(cut_off_as_text(text, calls), finish, (), stats)
        return Completion(text, finish, tool_calls=native, stats=stats)

    def _check_prompt_size(self, prompt_tokens: int) -> None:
        """Once, for a server its answers did not name (Ollama counts only the prompt tokens it
        did not have cached): a first prompt with tools that the server's own count says is too
        short to hold them means its chat template dropped them."""
        text_chars, tools_chars = self._sent
        if self._size_checked or not tools_chars or not prompt_tokens or self.dialect is not None:
            return
        self._size_checked = True
        if prompt_lacks_tools(prompt_tokens, text_chars, tools_chars):
            self._use_text_tools(f"it counted the prompt at {prompt_tokens:,} tokens, too few to hold the "
                                 f"{text_chars + tools_chars:,} characters sent", "seems to drop")

    def close(self) -> None:
        if self._client_obj is not None:
            try:
                self._client_obj.close()
            except Exception:  # noqa: BLE001
                pass
            self._client_obj = None
            self._http = None
        if self._count_http is not None:
            self._count_http.close()
            self._count_http = None


def _root_cause(e: BaseException) -> BaseException:
    seen = e
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__
    return seen


def _close_quietly(resp: Any) -> None:
    try:
        resp.close()
    except Exception:  # noqa: BLE001 - closing a response that broke is not news
        pass
