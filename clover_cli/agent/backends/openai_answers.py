"""Reading one chat-completions answer of an OpenAI-compatible server (openai_backend.py):
server-sent events or one JSON body, read line by line within the bounds of openai_limits.py,
turned into our stream items. A mixin of OpenAIBackend: it uses the backend's `endpoint`,
`timeout`, `_budget` and `_completion`.

Why this reader and the backend's retry loop, not the SDK's own stream iterator and retries (the
SDK stays the transport: client, proxies, auth, the request). Checked with openai 3.63 against the
stub server of tests/agent/openai_server.py, `client.chat.completions.create(..., stream=True)`:

- a server that ignores `stream: true` and answers one JSON body: the SDK's iterator yields
  nothing and raises nothing (an empty answer); here it is read as the completion it is;
- llama-server's `error: {...}` field (not `event: error`): nothing, no error; here an error,
  retried before any output like a 5xx;
- a stream cut off with no finish_reason and no [DONE]: the SDK ends quietly after the text;
  here the cut is reported and the text kept (AnswerCutOff);
- its SSE decoder buffers a line of any length and reads in the caller's thread; here lines are
  bounded (openai_limits.py) and read on a thread, so a cancel never waits for the server;
- its retries sleep without a word and without a cancel; here each wait of a second or more is
  a notice ("trying again in N s", a Retry-After included), a cancel ends the wait, an error event
  before output is retried, and a refused `tool_choice` or `tools` is asked again without it.

Import time decides nothing: `python -X importtime -c "import openai"` gave 2.2-3.4 s cumulative
on a busy 2-core machine, paid once on the first request whichever reader is used."""
from __future__ import annotations

import json
from typing import Any, Iterator

from clover_cli.agent.backends.base import BackendError, Completion, StreamItem
from clover_cli.agent.markup import MarkupSplitter, block_texts
from clover_cli.agent.backends.openai_errors import one_line as _one_line
from clover_cli.agent.backends.openai_errors import stream_error_payload as _error_payload
from clover_cli.agent.backends.openai_limits import JSON_BYTES, AnswerTooLarge, bounded_lines
from clover_cli.agent.backends.openai_stream import (EOF_ITEM, STOPPED, Assembler, LineReader, SseFields,
                                                     answer_kind, completion_stats, parse_json_completion)
from clover_cli.agent.backends.openai_wire import snippet
from clover_cli.agent.backends.recoverable import AnswerCutOff, StreamFeedbackError
from clover_cli.agent.events import BlockText


class Retry(Exception):
    """A failure worth another try (`wait`: the server's Retry-After, if it sent one)."""

    def __init__(self, message: str, wait: float | None = None, free: bool = False) -> None:
        super().__init__(message)
        self.message, self.wait = message, wait
        self.free = free  # asked again at once, not counted as a retry (the request changed)


class AnswerReader:
    """The answer-reading half of OpenAIBackend."""

    def _answer(self, resp: Any, start: float, stopped) -> Iterator[StreamItem]:
        lines = LineReader(bounded_lines(resp.iter_bytes()))
        try:
            ctype = (resp.headers.get("content-type") or "").split(";")[0].strip().lower()
            if answer_kind(ctype, lines, stopped, min(self.timeout, 10.0), self.endpoint) == "json":
                yield from self._json(lines, start, stopped)
            else:
                yield from self._sse(lines, start, stopped)
        finally:
            lines.close()

    def _json(self, lines: LineReader, start: float, stopped) -> Iterator[StreamItem]:
        """The whole JSON body of a server that ignored `stream: true`."""
        parts: list[str] = []
        size = 0
        while True:
            line = lines.get(stopped, self.timeout)
            if line is STOPPED:
                yield Completion("", "cancelled", stats=completion_stats(start, "", 0, {}))
                return
            if line is EOF_ITEM:
                break
            if isinstance(line, TimeoutError):
                raise BackendError(f"openai: {self.endpoint} did not finish its answer within {self.timeout:g} s")
            if isinstance(line, BaseException):
                self._over_limit(line)
                raise BackendError(f"openai: the answer from {self.endpoint} broke: {_one_line(line)}")
            size += len(line) + 1
            if size > JSON_BYTES:
                raise BackendError(f"openai: {self.endpoint} answered with a JSON body of over "
                                   f"{JSON_BYTES // (1 << 20)} MiB")
            parts.append(line)
        raw = "\n".join(parts)
        try:
            body = json.loads(raw)
        except ValueError:
            raise BackendError(f"openai: {self.endpoint} answered 200 application/json that is not JSON: "
                               f"{snippet(raw)!r}") from None
        reasoning, text, finish, calls, usage = parse_json_completion(body, self.endpoint)
        if reasoning:
            yield BlockText(reasoning, 0, thinking=True)
        yield from block_texts(MarkupSplitter(), text, 0, final=True)
        yield self._completion(text, finish, calls, [], completion_stats(start, text, 1, usage))

    def _sse(self, lines: LineReader, start: float, stopped) -> Iterator[StreamItem]:
        """A server-sent-event stream of chat-completion chunks."""
        acc, fields = Assembler(), SseFields()
        done = False
        while True:
            line = lines.get(stopped, self.timeout)
            if line is STOPPED:
                acc.finish = "cancelled"
                break
            if line is EOF_ITEM:
                break
            if isinstance(line, TimeoutError):
                self._cut_off(acc, start, f"openai: {self.endpoint} stopped streaming for {self.timeout:g} s")
            if isinstance(line, BaseException):
                self._over_limit(line)
                if not acc.output:
                    raise Retry(f"openai: the stream from {self.endpoint} broke: {_one_line(line)}")
                self._cut_off(acc, start, f"openai: the stream from {self.endpoint} broke: {_one_line(line)}")
            kind, payload = fields.read(line)
            if kind == "error":  # llama-server's `error:` field, or `event: error`
                self._stream_error(_error_payload(payload), acc)
            if kind != "data":
                continue  # blank lines, comments, event:/id:/retry: fields
            if payload == "[DONE]":
                done = True
                break
            try:
                event = json.loads(payload)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                raise BackendError(f"openai: {self.endpoint} sent an event that is not a JSON object: "
                                   f"{snippet(payload)!r}")
            if event.get("error") is not None:
                self._stream_error(event["error"], acc)
            if event.get("object") == "error":  # SGLang's and older vLLM's error object, unwrapped
                self._stream_error(event, acc)
            try:
                yield from acc.feed(event)
            except AnswerTooLarge as e:
                raise BackendError(f"openai: {self.endpoint}: {e}") from None
        if acc.finish != "cancelled" and not done and not acc.finish:
            self._cut_off(acc, start, f"openai: the stream from {self.endpoint} ended before the answer was "
                                      f"complete (no finish_reason and no [DONE] after {acc.chunks} chunk(s))")
        yield from acc.tail()
        calls = acc.call_dicts()
        yield self._completion(acc.text, acc.finish or "stop", acc.native(), calls,
                               completion_stats(start, acc.text, acc.chunks, acc.usage), acc.fingerprint)

    def _cut_off(self, acc: Assembler, start: float, message: str) -> None:
        """The answer stopped before its end: AnswerCutOff with what had streamed (a plain
        BackendError when nothing had)."""
        if not acc.text.strip():
            raise BackendError(message)
        stats = completion_stats(start, acc.text, acc.chunks, acc.usage)
        raise AnswerCutOff(f"{message}; the answer so far is kept, marked as cut off", acc.text, stats)

    def _over_limit(self, error: BaseException) -> None:
        """A read that broke a limit (openai_limits.py) is one line naming it, never retried."""
        why = str(error) if isinstance(error, AnswerTooLarge) else self._budget.exceeded
        if why:
            raise BackendError(f"openai: {self.endpoint}: {why}")

    def _stream_error(self, error: Any, acc: Assembler) -> None:
        """An error event inside a 200 stream: retried like a 5xx before any output; after
        output, the partial answer is kept and the model is told (StreamFeedbackError)."""
        message = _one_line(error.get("message", error) if isinstance(error, dict) else error)
        msg = f"openai: {self.endpoint} reported in the stream: {message}"
        if not acc.output:
            raise Retry(msg)
        raise StreamFeedbackError(msg, partial_text=acc.text,
                                  feedback=f"The model server failed while you were answering: {message}. "
                                           "Your answer above is incomplete; continue from where it stopped.")

