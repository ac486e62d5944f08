"""Counting a request's tokens as an OpenAI-compatible server will (docs/agent.md, "Context
window"), since the agent fits the conversation to the window by this count:

- where the server offers its own tokenizer (vLLM, SGLang, llama-server: `POST /tokenize`), it
  counts the prompt once it could come near the window (a shorter one cannot overflow);
- otherwise characters are divided by a characters-per-token ratio, 4 until the server's own
  counts teach a better one: `usage.prompt_tokens` of each answer, and the numbers of a
  context-length error ("This model's maximum context length is 8192 tokens. However, you
  requested 8193 tokens (7169 in the messages, 1024 in the completion)"), which also give the
  window and show when only the completion's room was too large.

A request the server refused for length is never sent again unchanged: with nothing left to
cut, the turn ends with one line saying so.
"""
from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass
from typing import Any

DEFAULT_CHARS_PER_TOKEN = 4.0
# usage.prompt_tokens includes the chat template and may be of a prompt the server cached
# (Ollama counts only the rest): a ratio outside these bounds is no measurement of the text
USAGE_RATIO_BOUNDS = (1.0, 8.0)
MIN_ROOM = 16  # tokens of answer below which max_tokens is left as asked (the server says why)
PER_MESSAGE = 8  # tokens a chat template adds around a message, where the server counts plain text
CACHE = 64  # counts kept (the fitting loop asks again for what it asked before)


def request_chars(messages: list[dict], tools: list[dict]) -> int:
    """The characters of a request's messages, calls and tool schemas (what the ratio divides)."""
    return sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls", ""), default=str)) + 8
               for m in messages) + len(json.dumps(tools, default=str))


@dataclass
class Overflow:
    """What a context-length error says: the window, the prompt's tokens and the completion's
    room asked for (each None when the message does not say)."""

    window: int | None = None
    prompt: int | None = None
    completion: int | None = None


_WINDOW_SAID = [r"maximum context length is (\d+)", r"context (?:size|length|window) \((\d+) tokens?\)",
                r"maximum allowed length \((\d+) tokens?\)", r"max_model_len[^\d]{0,10}(\d+)",
                r"(?:context length|context size|context window)\D{0,40}?(\d{3,7})"]
_PROMPT_SAID = [r"(\d+) (?:tokens )?in the messages", r"your (?:request|prompt) has (\d+) (?:input |prompt )?tokens",
                r"messages resulted in (\d+) tokens", r"request \((\d+) tokens?\)",
                r"input(?: length)? \((\d+) tokens?\)", r"prompt (?:is|has) (\d+) tokens"]
_COMPLETION_SAID = [r"(\d+) (?:tokens )?in the completion", r"max_(?:completion_)?tokens'? (?:is too large: )?(\d+)",
                    r"is too large: (\d+)"]


def _first(patterns: list[str], text: str) -> int | None:
    for pattern in patterns:
        m = re.search(pattern, text, re.IGNORECASE)
        if m:
            return int(m.group(1))
    return None


def overflow_numbers(detail: str) -> Overflow:
    """The numbers a server's context-length error gives (vLLM, SGLang, llama.cpp, OpenAI)."""
    return Overflow(_first(_WINDOW_SAID, detail), _first(_PROMPT_SAID, detail), _first(_COMPLETION_SAID, detail))


class TokenCounter:
    """The characters-per-token ratio learned from the server, and the server's exact counts."""

    def __init__(self) -> None:
        self.ratio = DEFAULT_CHARS_PER_TOKEN
        self._exact: dict[str, int] = {}

    def estimate(self, chars: int) -> int:
        """Tokens of `chars` characters at the ratio learned so far."""
        return math.ceil(chars / self.ratio)

    def learn_usage(self, chars: int, prompt_tokens: int) -> None:
        """An answer's `usage.prompt_tokens` for a request of `chars` characters."""
        if prompt_tokens > 0 and chars > 0:
            ratio = chars / prompt_tokens
            if USAGE_RATIO_BOUNDS[0] <= ratio <= USAGE_RATIO_BOUNDS[1]:
                self.ratio = ratio

    def learn_overflow(self, chars: int, said: Overflow, window: int) -> None:
        """A context-length error: the server's count of the prompt where it gave one; else the
        prompt took at least the window (less the completion's room), so the ratio is at most
        that and is lowered by a fifth besides, so the next count is larger."""
        if said.prompt:
            self.ratio = max(0.25, min(self.ratio, chars / said.prompt))
            return
        at_least = max(1, window - (said.completion or 0))
        self.ratio = max(0.25, min(self.ratio, chars / at_least) * 0.8)

    def cached(self, key: str) -> int | None:
        return self._exact.get(key)

    def keep(self, key: str, tokens: int) -> None:
        if len(self._exact) >= CACHE:
            self._exact.pop(next(iter(self._exact)))
        self._exact[key] = tokens


def tokenize_body(dialect: str | None, model: str, wire_messages: list[dict], tools: list[dict]) -> dict:
    """The /tokenize request for a server: vLLM takes chat messages (and renders its template;
    tools are added as their JSON text, a form every version takes); SGLang takes a `prompt`,
    llama-server a `content` (the messages as plain text)."""
    if dialect == "vLLM":
        body: dict[str, Any] = {"model": model, "messages": wire_messages, "add_generation_prompt": True}
        return body
    text = "\n".join(f"{m.get('role')}: {m.get('content') or ''}"
                     + (json.dumps(m["tool_calls"]) if m.get("tool_calls") else "") for m in wire_messages)
    text += "\n" + json.dumps(tools) if tools else ""
    return {"content": text} if dialect == "llama-server" else {"model": model, "prompt": text}


def tokens_in(answer: Any, dialect: str | None, messages: int) -> int | None:
    """The count a /tokenize answer gives ({"count"} or {"tokens": [...]}), with the template's
    share where the server counted plain text; None when it gives none."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if type(count) is not int:
        count = len(answer["tokens"]) if isinstance(answer.get("tokens"), list) else None
    if count is None or count <= 0:
        return None
    return count if dialect == "vLLM" else count + PER_MESSAGE * messages


TOKENIZE_DIALECTS = ("vLLM", "SGLang", "llama-server")
TOKENIZE_TIMEOUT = 3.0
TOKENIZE_BYTES = 8 * 1024 * 1024  # a 128k-token prompt's ids, with room


class ServerCounting:
    """The counting half of OpenAIBackend (a mixin: it uses `model`, `dialect`, `_window`,
    `base_url`, `root_url`, `wire_request` and `_key_header`)."""

    def _counting_init(self) -> None:
        self._counter = TokenCounter()
        self._tokenize_ok = True  # until the server's /tokenize fails once
        self._count_http: Any = None
        self._count_lock = threading.Lock()  # the agent's thread and a front end's may both count
        self._request_chars = 0  # request_chars of the request in flight
        self._refused = ""  # the last request refused for length, as sent
        self._last_count = 0  # the prompt count the last request's max_tokens was fitted to

    def _answer_room(self, messages: list[dict], tools: list[dict], max_new_tokens: int) -> int:
        """max_tokens: what the window leaves the prompt, where the window is known (a server
        counts prompt and answer together), at most `max_new_tokens`."""
        if self._window is None:
            return max_new_tokens
        self._last_count = self.count_tokens(messages, tools)
        room = self._window - self._last_count
        return min(max_new_tokens, room) if room >= MIN_ROOM else max_new_tokens

    def count_tokens(self, messages: list[dict], tools: list[dict]) -> int:
        """The prompt's tokens: the server's own count where it offers one and the prompt could
        come near the window, else the characters at the learned ratio."""
        chars = request_chars(messages, tools)
        window = self._window or 32768
        if self._tokenize_ok and self.dialect in TOKENIZE_DIALECTS and chars >= window // 2:
            exact = self._server_count(messages, tools)
            if exact is not None:
                return exact
        return self._counter.estimate(chars)

    def _server_count(self, messages: list[dict], tools: list[dict]) -> int | None:
        wire, wire_tools, _ = self.wire_request(messages, tools)
        count = self._tokenize(tokenize_body(self.dialect, self.model, wire, wire_tools), len(wire))
        if count is not None and self.dialect == "vLLM" and wire_tools:  # the schemas' text
            tools_count = self._tokenize({"model": self.model, "prompt": json.dumps(wire_tools)}, 0)
            count = None if tools_count is None else count + tools_count
        return count

    def _tokenize(self, body: dict, messages: int) -> int | None:
        """POST /tokenize, bounded like a probe (its own client: the status bar may count while
        an answer streams); None, and never asked again, when the server gives no count."""
        with self._count_lock:
            return self._tokenize_locked(body, messages)

    def _tokenize_locked(self, body: dict, messages: int) -> int | None:
        key = json.dumps(body, sort_keys=True)
        known = self._counter.cached(key)
        if known is not None:
            return known
        import time

        from clover_cli.agent.backends.openai_limits import HEAD_BYTES, Budget, bounded_http_client, read_capped
        count = None
        try:
            if self._count_http is None:
                self._count_budget = Budget()
                self._count_http = bounded_http_client(TOKENIZE_TIMEOUT, self._count_budget)
            self._count_budget.phase(time.monotonic() + TOKENIZE_TIMEOUT, HEAD_BYTES + TOKENIZE_BYTES,
                                     "the server's token count", "/tokenize did not answer in time")
            with self._count_http.stream("POST", self.root_url + "/tokenize", json=body,
                                         headers=self._key_header(), timeout=TOKENIZE_TIMEOUT) as resp:
                raw = read_capped(resp.iter_bytes(), TOKENIZE_BYTES) if resp.status_code == 200 else None
            count = tokens_in(json.loads(raw), self.dialect, messages) if raw is not None else None
        except Exception:  # noqa: BLE001 - any failure means "the server does not count for us"
            count = None
        if count is None:
            self._tokenize_ok = False
            return None
        self._counter.keep(key, count)
        return count

    def _learn_usage(self, prompt_tokens: int) -> None:
        """An answer's prompt count teaches the ratio (not Ollama's: it counts only what it had
        not cached)."""
        if self.dialect != "Ollama":
            self._counter.learn_usage(self._request_chars, prompt_tokens)

    def _length_refused(self, detail: str, body: dict) -> tuple[str, bool]:
        """A context-length error: what the server said is learned (its window, its count of the
        prompt, the ratio). Returns what the error adds to its message, and whether only the
        answer's room was too large (asked again at once with less)."""
        said = overflow_numbers(detail)
        window = min(self._window or said.window or 32768, said.window or self._window or 32768)
        self._window = window
        self._counter.learn_overflow(self._request_chars, said, window)
        if said.prompt and said.prompt > self._last_count:  # its /tokenize undercounts: the ratio now
            self._tokenize_ok = False
        self._refused = json.dumps(body, sort_keys=True)
        counted = f", the server counted the prompt at {said.prompt:,} tokens" if said.prompt else ""
        room_only = bool(said.prompt and said.prompt + MIN_ROOM <= window
                         and int(body.get("max_tokens") or 0) > window - said.prompt)
        return f" (context window now {window:,} tokens{counted})", room_only

    def _check_not_refused(self, body: dict) -> None:
        """Never the request the server refused for length again, unchanged."""
        from clover_cli.agent.backends.base import BackendError

        if self._refused and json.dumps(body, sort_keys=True) == self._refused:
            raise BackendError(f"openai: the prompt does not fit {self.base_url}'s context window of "
                               f"{self._window:,} tokens and nothing more can be cut; start a new session "
                               "or shorten the task")
