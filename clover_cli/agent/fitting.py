"""Keeping the conversation inside the context window (a mixin of `Agent`, agent.py; docs/agent.md,
"Context window"): old tool outputs elided, the older conversation compacted into a summary by the
model, and, as a last resort, the longest messages cut, each step with a notice kept in the
session file.
"""
from __future__ import annotations

from typing import Iterator

from clover_cli.agent.backends.base import Completion
from clover_cli.agent.context import compacted, cut_until_fits, elide_tool_outputs, tail_start
from clover_cli.agent.events import AgentError, AgentEvent, Notice
from clover_cli.agent.parsing import parse_tool_calls
from clover_cli.agent.prompt_files import observation, prompt_text


class ContextFitting:
    """Mixed into Agent, which provides backend, config, tools, and _log, _messages, _lock,
    _cancel, _task."""

    def _budget(self) -> int:
        window = self.config.context_window or self.backend.context_window
        return window - min(self.config.max_new_tokens, window // 4)

    def _fit_context(self) -> Iterator[AgentEvent]:
        """Makes the next request fit the context window (docs/agent.md, "Context window"): old
        tool outputs are elided, then the older conversation is compacted, then the longest
        messages (a tool output, an attachment, a long paste) are cut, each with a notice."""
        budget = self._budget()
        if self.backend.count_tokens(self._messages, self.tools) <= budget:
            return
        n = elide_tool_outputs(self._messages, self.config.keep_recent_tool_outputs)
        if n:
            self._log.append({"type": "reset", "messages": self._messages})
            yield from self._notice(f"Elided {n} old tool output(s) to fit the context window.")
            if self.backend.count_tokens(self._messages, self.tools) <= budget:
                return
        body = self._messages[1:]
        if body[:tail_start(body)]:  # something older than the latest state to summarise
            yield from self._compact()
        if self.backend.count_tokens(self._messages, self.tools) > budget:
            yield from self._squeeze(budget)

    def _notice(self, message: str) -> Iterator[AgentEvent]:
        """A notice that is also kept in the session file (what the transcript shows, it holds)."""
        self._log.append({"type": "notice", "message": message})
        yield Notice(message)

    def _squeeze(self, budget: int) -> Iterator[AgentEvent]:
        """Last resort: elide every tool output but the latest, then cut the longest messages
        until the request fits; one notice per message cut, naming it."""
        if elide_tool_outputs(self._messages, keep_recent=1):
            yield from self._notice("Elided the earlier tool outputs to fit the context window.")
        count = lambda: self.backend.count_tokens(self._messages, self.tools)  # noqa: E731
        cuts = cut_until_fits(self._messages, count, budget)
        self._log.append({"type": "reset", "messages": self._messages})
        window = self.config.context_window or self.backend.context_window
        for what, before, after in cuts:
            yield from self._notice(observation("cut_notice", what=what, window=window, before=before, after=after))

    def compact(self) -> Iterator[AgentEvent]:
        """Has the model summarise the older conversation; keeps the system prompt, the task and
        the latest state. Yields Notices (and an AgentError, the conversation unchanged, if the
        model call fails; inside a turn the older part is dropped instead). A front end's
        /compact: a step of its own, like a turn (one at a time; an earlier cancel is forgotten,
        a cancel during it leaves the conversation unchanged)."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("a turn is already running")
        try:
            self._cancel.clear()
            yield from self._compact(on_demand=True)
        finally:
            self._lock.release()

    def _compact(self, on_demand: bool = False) -> Iterator[AgentEvent]:
        body = self._messages[1:]
        head = body[:tail_start(body)]
        if not head:  # inside a turn, the fitting that follows cuts instead (no news)
            if on_demand:
                yield Notice("Nothing to compact yet.")
            return
        yield Notice("Compacting the conversation ...")
        request = [self._messages[0]] + head + [{"role": "user", "content": prompt_text("agent_compaction.md")}]
        budget = self._budget()
        request = _drop_oldest(request, lambda r: self.backend.count_tokens(r, []) <= budget)
        older, ask = request[:-1], request[-1:]
        cut_until_fits(older, lambda: self.backend.count_tokens(older + ask, []), budget)  # one huge attachment
        request = older + ask
        summary, failed = "", ""
        try:
            for item in self.backend.stream(request, [], max_new_tokens=min(1024, self.config.max_new_tokens),
                                            cancel=self._cancel):
                if isinstance(item, Completion):
                    summary = parse_tool_calls(item.text).text
        except Exception as e:  # nothing summarised: the older part is dropped (below)
            failed = str(e)
        if self._cancel.is_set():  # a cut-off summary must not replace the conversation
            yield Notice("Compaction cancelled; the conversation is unchanged.")
            return
        if failed and on_demand:  # the user asked: nothing is lost, they may try again
            yield AgentError(f"compaction failed: {failed}")
            return
        if failed:  # inside a turn the next request must fit
            yield from self._notice(f"The model could not summarise the conversation ({failed}); "
                                    "the earlier part was dropped.")
            summary = ""
        before = len(self._messages)
        self._messages = compacted(self._messages, summary, self._task)
        self._log.append({"type": "compaction", "summary": summary})
        self._log.append({"type": "reset", "messages": self._messages})
        yield from self._notice(f"Compacted {before} messages into {len(self._messages)}.")


def _drop_oldest(request: list[dict], fits) -> list[dict]:
    """`request` without as few of its oldest messages after the first as make `fits(...)`
    true, keeping at least three: a binary search (O(log n) counts), so a resumed
    conversation of 50,000 messages is cut in a handful of counts, not 50,000."""
    if len(request) <= 3 or fits(request):
        return request
    low, high = 1, len(request) - 3  # drop `high` and the request is at its three-message floor
    while low < high:
        mid = (low + high) // 2
        if fits([request[0]] + request[1 + mid:]):
            high = mid
        else:
            low = mid + 1
    return [request[0]] + request[1 + low:]
