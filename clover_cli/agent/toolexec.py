"""Runs one tool call for the loop: protected paths, approval, live output, the result.

A generator: yields agent events (ApprovalRequested, ToolOutput, Notice) and returns the
ToolResult through StopIteration (use `result = yield from execute_call(...)`).
"""
from __future__ import annotations

import posixpath
import queue
import threading
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from clover_cli.agent.approvals import ApprovalPolicy
from clover_cli.agent.driver import INTERRUPTED
from clover_cli.agent.events import AgentEvent, ApprovalAnswer, ApprovalRequested, Notice, ToolOutput
from clover_cli.agent.prompt_files import observation
from clover_cli.agent.queues import STOPPED, next_item
from clover_cli.tools.base import ToolResult
from clover_cli.tools.registry import ToolArgumentError
from clover_cli.tools.toolset import ToolSet

_DONE = object()
CANCEL_GRACE = 3.0  # seconds a cancelled tool gets to stop before the turn goes on without it


@dataclass
class CallContext:
    root: Path
    policy: ApprovalPolicy
    protected_paths: tuple[str, ...]
    cancel: threading.Event
    timeout: float | None
    before_write: Callable[[list[str]], None]  # called with planned writes before a writing tool runs
    log: Callable[[dict], None]
    tools: ToolSet = field(default_factory=ToolSet)  # the agent's own tools (built-ins and its MCP ones)


def _norm(path: str) -> str:
    p = posixpath.normpath(str(path).replace("\\", "/")).lstrip("/")
    return "" if p == "." else p


def protected_hit(paths: list[str], protected: tuple[str, ...]) -> str | None:
    """The first planned path that is (or is inside) a protected path."""
    for path in paths:
        p = _norm(path)
        for q in protected:
            q = _norm(q)
            if q and (p == q or p.startswith(q + "/")):
                return path
    return None


def _wait(future: Future, cancel: threading.Event) -> ApprovalAnswer | None:
    """The answer, or None when the turn was cancelled while waiting."""
    while True:
        if cancel.is_set():
            return None
        try:
            answer = future.result(timeout=0.05)
        except FutureTimeout:
            continue
        if isinstance(answer, ApprovalAnswer):
            return answer
        if isinstance(answer, str) and answer in ("yes", "no", "always"):
            return ApprovalAnswer(answer)  # type: ignore[arg-type]
        return ApprovalAnswer("no", "invalid approval answer")


def execute_call(call_id: str, name: str, args: dict, ctx: CallContext) -> Iterator[AgentEvent]:
    """Applies the policy to one call and runs it; returns its ToolResult.

    Whatever the call holds, the result is a ToolResult the model reads: an exception escaping
    the policy, the planning or the tool (OSError ENAMETOOLONG, ValueError, RecursionError, ...)
    becomes ok=False with details["error"] == "crash", never a crash of the turn."""
    try:
        return (yield from _execute(call_id, name, args, ctx))
    except Exception as e:
        return _crash_result(name, e)


def _crash_result(name: str, e: BaseException) -> ToolResult:
    text = f"tool {name} failed unexpectedly: {type(e).__name__}: {e}"
    if len(text) > 500:
        text = text[:500] + " ..."
    return ToolResult(False, text, {"error": "crash"})


def _execute(call_id: str, name: str, args: dict, ctx: CallContext) -> Iterator[AgentEvent]:
    tools = ctx.tools
    try:  # a call no tool can run (unknown tool, wrong types, over a size limit) is answered
        tools.validate_args(name, args)  # before anyone is asked to approve it
    except (ToolArgumentError, ValueError, OverflowError, TypeError, RecursionError) as exc:
        return ToolResult(False, str(exc)[:300], {"error": "bad_arguments"})
    writing = tools.is_writing(name)
    planned: list[str] = []
    if writing or ctx.protected_paths:
        try:
            planned = list(tools.planned_writes(name, args, ctx.root))
        except Exception:  # a bad call: run_tool reports the argument error itself
            planned = []
    hit = protected_hit(planned, ctx.protected_paths) if ctx.protected_paths else None
    if hit is not None:
        return ToolResult(False, observation("protected", name=name, path=hit), {"error": "protected"})
    decision = ctx.policy.decide(name, args)
    if decision.verdict == "refuse":
        return ToolResult(False, observation("refused", name=name, reason=decision.reason), {"error": "refused"})
    if decision.verdict == "ask":
        try:
            summary = tools.preview(name, args, ctx.root)
        except Exception as e:  # preview of a malformed call: show the arguments instead
            summary = f"{name} {args} ({e})"
        future: Future = Future()
        yield ApprovalRequested(call_id, name, dict(args), summary, decision.always_key, future)
        answer = _wait(future, ctx.cancel)
        if answer is None:
            return ToolResult(False, observation("cancelled_tool"), {"error": "cancelled"})
        ctx.log({"type": "approval", "call_id": call_id, "name": name, "decision": answer.decision,
                 "feedback": answer.feedback, "always_key": decision.always_key})
        if answer.decision == "no" and (ctx.cancel.is_set() or answer.feedback == INTERRUPTED):
            return ToolResult(False, observation("interrupted_approval", name=name), {"error": "cancelled"})
        if answer.decision == "no":
            text = (observation("denied_feedback", name=name, feedback=answer.feedback) if answer.feedback
                    else observation("denied", name=name))
            return ToolResult(False, text, {"error": "denied"})
        if answer.decision == "always" and decision.always_key:
            ctx.policy.remember(name, args, decision.always_key)
            yield Notice(f"Approved {decision.always_key!r} for this project (saved in your Clover state folder).")
        elif answer.decision == "always":
            yield Notice("Approved this call only: a command like this is never remembered (it could run anything).")
    if writing and planned:
        ctx.before_write(planned)
    return (yield from _run_streaming(call_id, name, args, ctx, decision.sandbox))


def _run_streaming(call_id: str, name: str, args: dict, ctx: CallContext,
                   sandbox: str = "") -> Iterator[AgentEvent]:
    """Runs the tool in a worker thread and yields its output chunks as they come.

    The agent's cancel event goes to the tool (run_shell kills its process group). If the tool
    has not stopped CANCEL_GRACE seconds after a cancel, the turn goes on without it."""
    chunks: queue.Queue = queue.Queue()
    holder: dict[str, ToolResult] = {}
    output: list[str] = []

    def work() -> None:
        try:
            holder["result"] = ctx.tools.run(name, args, ctx.root, on_output=chunks.put, timeout=ctx.timeout,
                                             cancel=ctx.cancel, sandbox_profile=sandbox or None)
        except Exception as e:  # a tool bug must not kill the session; the model reads it
            holder["result"] = _crash_result(name, e)
        finally:
            chunks.put(_DONE)

    threading.Thread(target=work, name=f"tool-{name}", daemon=True).start()
    cancelled_at: float | None = None

    def grace_over() -> bool:
        nonlocal cancelled_at
        if cancelled_at is None and ctx.cancel.is_set():
            cancelled_at = time.monotonic()
        return cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE

    while True:
        item = next_item(chunks, grace_over)
        if item is STOPPED:
            partial = "".join(output)[-2000:]
            text = (partial + "\n" if partial else "") + observation("cancelled_running", name=name)
            return ToolResult(False, text, {"error": "cancelled", "cancelled": True})
        if item is _DONE:
            break
        if isinstance(item, str) and item:
            output.append(item)
            yield ToolOutput(call_id, name, item)
    result = holder["result"]
    if (result.details or {}).get("cancelled") or (cancelled_at is not None and not result.ok):
        note = observation("cancelled_running", name=name)
        text = result.output if note in (result.output or "") else (result.output or "").rstrip() + "\n" + note
        return ToolResult(False, text.lstrip("\n"), {**(result.details or {}), "error": "cancelled", "cancelled": True})
    return result
