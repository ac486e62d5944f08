"""Driving the agent without a human: approvals answered by policy, events summarised.

`clover fix` and `clover swebench` consume the agent's event stream (clover_cli.agent.events)
here, run by the one turn driver (clover_cli/agent/driver.py); nothing in this module knows a
terminal library. `LockedBackend` and `BackendProvider` live in clover_cli/agent/backends/lifetime.py
(re-exported here for old imports).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, TextIO

from clover_cli.agent.backends.lifetime import BackendProvider, LockedBackend  # noqa: F401 (moved)
from clover_cli.agent.driver import DEFAULT_GRACE, TurnDriver
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
               approve: Callable[[ApprovalRequested], ApprovalAnswer] | None = None,
               grace: float = DEFAULT_GRACE) -> TurnRecord:
    """Run one agent turn to the end on the turn driver's worker thread, answering every approval
    with `approve` (default: yes).

    A short trace of tool calls goes to `log` when given. Exceptions from the agent become an
    error record (reason "error"); they never escape. Ctrl+C (KeyboardInterrupt in this thread)
    cancels the turn (which also stops a running tool), gives it up to `grace` seconds to wind
    down, and is re-raised.
    """
    record = TurnRecord()

    def say(line: str) -> None:
        if log is not None:
            log.write(line + "\n")
            log.flush()

    def seen(ev) -> None:  # on the worker thread, in order
        if isinstance(ev, ToolCallProposed):
            record.tool_calls += 1
            say(f"  -> {ev.name} {_one_line(dict(ev.arguments))}")
        elif isinstance(ev, ToolFinished):
            if not ev.ok:
                record.tool_failures += 1
            say(f"  {'ok' if ev.ok else 'FAILED'} {ev.name}: {_one_line(ev.output, 120)}")
        elif isinstance(ev, AgentError):  # each line of a multi-line error (the attempts it lists)
            record.errors.append(ev.message)
            head, *rest = ev.message.splitlines() or [""]
            say(f"  error: {_one_line(head)}")
            for line in rest:
                say(f"    {_one_line(line)}")
        elif isinstance(ev, Notice):
            say(f"  note: {_one_line(ev.message)}")
        elif isinstance(ev, TurnFinished):
            record.reason = ev.reason
            record.final_text = ev.final_text
            record.stats = dict(ev.stats)

    driver = TurnDriver(agent, approve=approve or (lambda ev: ApprovalAnswer("yes")), on_event=seen,
                        grace=grace, name="clover-headless-turn")
    driver.run(text)
    return record
