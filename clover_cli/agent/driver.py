"""One way to drive an agent turn: on a worker thread, interruptible, with a bounded wait.

`Agent.run_turn` is a blocking generator (docs/design.md, "Agent"). Every front end runs it on a
worker thread so that its own thread stays free for Ctrl+C or drawing; `TurnDriver` is that
worker, shared by `clover run`, `clover fix`, `clover swebench` (through modes/headless.py) and
the TUI:

- events are forwarded, in order, to `on_event` (called on the worker thread: the TUI posts a
  message from there) and to a queue read by `events()` (the caller's thread: `clover run`);
  `on_end(finished)` is called once after the last one (the TUI's "idle again");
- `approve(request)`, when given, answers every approval before the event is forwarded (the
  request's future is then done, so a consumer can read the decision); without it the consumer
  answers the future itself (the TUI's dialog);
- `cancel()` stops the turn at the next block or tool poll (the agent's own cancel) and answers a
  pending approval "no"; if the worker has not ended `grace` seconds later (a model step that
  cannot be interrupted), the driver gives up on it: it emits `TurnFinished("cancelled")` itself
  and drops whatever the abandoned worker yields afterwards;
- an exception from the turn (or from `approve`/`on_event`) becomes an `AgentError` and a
  `TurnFinished("error")`: the stream always ends with exactly one TurnFinished.

Only the standard library and the agent's own events are used here (docs/design.md, boundaries).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import InvalidStateError
from typing import Any, Callable, Iterable, Iterator

from clover_cli.agent.events import (AgentError, AgentEvent, ApprovalAnswer, ApprovalRequested,
                                     TurnFinished, TurnStarted)
from clover_cli.agent.queues import STOPPED, next_item

DEFAULT_GRACE = 5.0  # seconds a cancelled turn gets to wind down before it is abandoned
INTERRUPTED = "Interrupted by the user."


def error_message(exc: BaseException) -> str:
    """One line naming the exception, as error events carry it."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class TurnDriver:
    """Runs one agent turn (or any agent event generator) on a daemon worker thread.

    `agent` needs `run_turn(text)` and `cancel()`. Typical uses::

        finished = TurnDriver(agent, approve=policy).run("fix the test")   # blocking, Ctrl+C-safe

        driver = TurnDriver(agent).start("task")                           # caller consumes
        for event in driver.events():
            ...

        TurnDriver(agent, on_event=post).start("task")                     # callback only (TUI)
    """

    def __init__(self, agent: Any, *, approve: Callable[[ApprovalRequested], ApprovalAnswer] | None = None,
                 on_event: Callable[[AgentEvent], None] | None = None,
                 on_end: Callable[[TurnFinished | None], None] | None = None, grace: float = DEFAULT_GRACE,
                 name: str = "clover-turn") -> None:
        self.agent = agent
        self.approve = approve
        self.on_event = on_event
        self.on_end = on_end  # called once, after the last event (None: a source without TurnFinished)
        self.grace = grace
        self.name = name
        self.finished: TurnFinished | None = None  # the one TurnFinished, once emitted
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()  # orders emits against giving up
        self._ended = threading.Event()  # the TurnFinished (real or given up) was queued
        self._done = threading.Event()  # ... and on_event has seen it: wait() returns
        self._cancelled = threading.Event()
        self._pending: list[ApprovalRequested] = []
        self._started = False
        self._thread: threading.Thread | None = None

    # -- starting -------------------------------------------------------------------------------
    def start(self, text: str | None = None, *,
              source: Callable[[], Iterable[AgentEvent]] | None = None) -> "TurnDriver":
        """Start `agent.run_turn(text)`, or the generator `source()` returns (e.g. the TUI's
        `agent.compact`), on the worker thread; returns self."""
        if self._started:
            raise RuntimeError("a TurnDriver runs one turn; make a new one")
        if (text is None) == (source is None):
            raise ValueError("give exactly one of text and source")
        self._started = True
        make = source if source is not None else (lambda: self.agent.run_turn(text))
        self._thread = threading.Thread(target=self._work, args=(make,), name=self.name, daemon=True)
        self._thread.start()
        if self._cancelled.is_set():  # cancelled before it started: the give-up clock runs now
            self._arm()
        return self

    def run(self, text: str) -> TurnFinished:
        """Start the turn and wait for its end in this thread. On Ctrl+C (KeyboardInterrupt) the
        turn is cancelled, gets up to `grace` seconds to end, and the KeyboardInterrupt is
        re-raised. A Ctrl+C that lands inside `start` (the worker may already run) cancels too."""
        try:
            self.start(text)
            return self.wait()
        except KeyboardInterrupt:
            self.cancel()
            if self._started:  # else nothing runs and nothing will end: no wait
                self.wait(self.grace + 0.5)
            raise

    # -- the worker -----------------------------------------------------------------------------
    def _work(self, make: Callable[[], Iterable[AgentEvent]]) -> None:
        try:
            for event in make():
                if isinstance(event, TurnStarted) and self._cancelled.is_set():
                    self.agent.cancel()  # cancelled before the turn began (it clears the flag)
                if isinstance(event, ApprovalRequested):
                    self._on_approval(event)
                self._emit(event)
        except BaseException as exc:  # noqa: BLE001 - every failure ends the turn as an event
            self._emit(AgentError(error_message(exc), fatal=True), quiet=True)
            self._emit(TurnFinished("error", "", {}), quiet=True)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                ended = self._ended.is_set()
                self._ended.set()
            if not ended:  # a source that yields no TurnFinished (compaction)
                self._queue.put(_END)
                self._end()

    def _on_approval(self, request: ApprovalRequested) -> None:
        if self._cancelled.is_set():
            _answer(request, ApprovalAnswer("no", INTERRUPTED))
        elif self.approve is not None:
            _answer(request, self.approve(request))
        else:
            self._pending = [r for r in self._pending if not r.future.done()] + [request]
            if self._cancelled.is_set():  # a cancel that came while it was being added
                _answer(request, ApprovalAnswer("no", INTERRUPTED))

    def _emit(self, event: AgentEvent, quiet: bool = False) -> None:
        with self._lock:
            if self._ended.is_set():  # given up on, or already finished: drop
                return
            self._queue.put(event)
            final = isinstance(event, TurnFinished)
            if final:
                self.finished = event
                self._ended.set()
                self._queue.put(_END)
        try:
            if self.on_event is not None:
                self.on_event(event)
        except Exception:
            if not quiet and not final:
                raise
        finally:
            if final:
                self._end()

    # -- control --------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the turn (thread-safe, idempotent); a worker still running `grace` seconds later
        is abandoned and the turn ends "cancelled"."""
        first = not self._cancelled.is_set()
        self._cancelled.set()
        self.agent.cancel()
        for request in self._pending:
            _answer(request, ApprovalAnswer("no", INTERRUPTED))
        if first and self._started:
            self._arm()

    def _arm(self) -> None:
        timer = threading.Timer(self.grace, self._give_up)
        timer.daemon = True
        timer.start()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _give_up(self) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            finished = TurnFinished("cancelled", "", {"abandoned": True})
            self.finished = finished
            self._queue.put(finished)
            self._ended.set()
            self._queue.put(_END)
        try:
            if self.on_event is not None:
                self.on_event(finished)
        except Exception:
            pass
        finally:
            self._end()

    def _end(self) -> None:
        """Once per driver: `on_end`, then wake `wait()`."""
        try:
            if self.on_end is not None:
                self.on_end(self.finished)
        except Exception:
            pass
        finally:
            self._done.set()

    # -- waiting --------------------------------------------------------------------------------
    def events(self, poll: float = 0.1) -> Iterator[AgentEvent]:
        """The turn's events in the caller's thread, up to and including its TurnFinished. The
        wait wakes every `poll` seconds, so a signal handler in this thread runs at once. Use
        either this or `on_event`'s events for display, not both."""
        while True:
            item = next_item(self._queue, poll=poll)
            if item is _END or item is STOPPED:
                return
            yield item

    def wait(self, timeout: float | None = None) -> TurnFinished | None:
        """Block until the turn has ended (or `timeout` seconds); its TurnFinished, or None if it
        has not ended. Wakes every 0.2 s so Ctrl+C reaches the caller (not Thread.join: a join
        interrupted by Ctrl+C may not wait again)."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._done.wait(0.2):
            if end is not None and time.monotonic() >= end:
                return None
        return self.finished

    @property
    def running(self) -> bool:
        """Started and not yet ended."""
        return self._started and not self._done.is_set()


_END = object()


def _answer(request: ApprovalRequested, answer: ApprovalAnswer) -> None:
    try:
        request.future.set_result(answer)
    except InvalidStateError:  # answered already (the user, or a cancel)
        pass


def drive(agent: Any, text: str, **kwargs: Any) -> TurnFinished:
    """`TurnDriver(agent, **kwargs).run(text)`: one turn, blocking, Ctrl+C-safe."""
    return TurnDriver(agent, **kwargs).run(text)
