"""Driving the agent without a human: approvals answered by policy, events summarised.

`clover fix` and `clover swebench` consume the agent's event stream (clover_cli.agent.events)
here; nothing in this module knows a terminal library.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, TextIO

from clover_cli.agent.events import (AgentError, ApprovalAnswer, ApprovalRequested, Notice,
                                     ToolCallProposed, ToolFinished, TurnFinished)


@dataclass
class TurnRecord:
    """What one headless turn did."""

    reason: str = "error"
    final_text: str = ""
    tool_calls: int = 0
    tool_failures: int = 0
    errors: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def drive_turn(agent, text: str, *, log: TextIO | None = None,
               approve: Callable[[ApprovalRequested], ApprovalAnswer] | None = None) -> TurnRecord:
    """Run one agent turn to the end, answering every approval with `approve` (default: yes).

    A short trace of tool calls goes to `log` when given. Exceptions from the agent become an
    error record (reason "error"); they never escape.
    """
    record = TurnRecord()
    approve = approve or (lambda ev: ApprovalAnswer("yes"))

    def say(line: str) -> None:
        if log is not None:
            log.write(line + "\n")
            log.flush()

    try:
        for ev in agent.run_turn(text):
            if isinstance(ev, ApprovalRequested):
                if not ev.future.done():
                    ev.future.set_result(approve(ev))
            elif isinstance(ev, ToolCallProposed):
                record.tool_calls += 1
                say(f"  -> {ev.name} {_one_line(dict(ev.arguments))}")
            elif isinstance(ev, ToolFinished):
                if not ev.ok:
                    record.tool_failures += 1
                say(f"  {'ok' if ev.ok else 'FAILED'} {ev.name}: {_one_line(ev.output, 120)}")
            elif isinstance(ev, AgentError):
                record.errors.append(ev.message)
                say(f"  error: {_one_line(ev.message)}")
            elif isinstance(ev, Notice):
                say(f"  note: {_one_line(ev.message)}")
            elif isinstance(ev, TurnFinished):
                record.reason = ev.reason
                record.final_text = ev.final_text
                record.stats = dict(ev.stats)
    except Exception as exc:  # an agent crash is reported, the caller goes on
        record.reason = "error"
        record.errors.append(f"{type(exc).__name__}: {exc}")
        say(f"  agent crashed: {_one_line(record.errors[-1])}")
    return record


def drive_turn_interruptibly(agent, text: str, *, log: TextIO | None = None,
                             grace: float = 5.0, **kwargs) -> TurnRecord:
    """drive_turn on a worker thread, so that Ctrl-C reaches the caller at once.

    On KeyboardInterrupt the agent is cancelled (which also stops a running tool), the turn gets
    up to `grace` seconds to wind down, and the KeyboardInterrupt is re-raised.
    """
    box: dict[str, TurnRecord] = {}
    done = threading.Event()  # not Thread.join: a join interrupted by Ctrl-C may not wait again

    def work() -> None:
        try:
            box["record"] = drive_turn(agent, text, log=log, **kwargs)
        finally:
            done.set()

    threading.Thread(target=work, name="clover-turn", daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        agent.cancel()
        done.wait(grace)
        raise
    return box.get("record") or TurnRecord(errors=["the turn ended without a result"])


class LockedBackend:
    """Shares one in-process model between worker threads: one generation at a time.

    An in-process engine model is not thread-safe; this wrapper holds a lock for the whole of
    each `stream` call and forwards everything else to the wrapped backend.
    """

    def __init__(self, backend, lock: threading.Lock | None = None):
        self._backend = backend
        self._lock = lock or threading.Lock()

    def stream(self, *args, **kwargs):
        """The wrapped backend's stream, generated under the lock."""
        with self._lock:
            yield from self._backend.stream(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def __setattr__(self, name, value):
        if name in ("_backend", "_lock"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._backend, name, value)


class BackendProvider:
    """Hands each instance a backend, safely for worker threads.

    In-process models (tiny, a checkpoint dir, hf:, smollm2) are loaded once and shared through a
    LockedBackend, so N workers do not hold N copies and never run the model concurrently.
    Other specs (replay:, openai:) get a fresh backend per call: a replay script starts from its
    first completion for every instance, and remote servers take concurrent requests.
    """

    def __init__(self, spec: str, factory: Callable[[str], object], in_process: bool,
                 preloaded=None):
        self.spec = spec
        self._factory = factory
        self._in_process = in_process or preloaded is not None
        self._shared = LockedBackend(preloaded) if preloaded is not None else None
        self._lock = threading.Lock()

    def get(self):
        """A backend for one instance; exceptions from loading propagate."""
        if not self._in_process:
            return self._factory(self.spec)
        with self._lock:
            if self._shared is None:
                self._shared = LockedBackend(self._factory(self.spec))
            return self._shared

    def release(self, backend) -> None:
        """Close a per-instance backend (the shared one stays until close())."""
        if backend is not self._shared and hasattr(backend, "close"):
            try:
                backend.close()
            except Exception:
                pass

    def close(self) -> None:
        """Close the shared backend, if one was loaded."""
        if self._shared is not None and hasattr(self._shared, "close"):
            try:
                self._shared.close()
            except Exception:
                pass
