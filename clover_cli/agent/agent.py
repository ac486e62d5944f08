"""The agent loop (docs/design.md, Boundaries and Agent): model -> tool calls -> tools -> model, as events.

Headless: `run_turn` is a blocking generator yielding the frozen dataclasses of events.py; every
front end (TUI, `clover run`, `clover fix`, `clover swebench`) consumes the same stream.
"""
from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from clover_cli.agent.approvals import ApprovalPolicy
from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend
from clover_cli.agent.backends.recoverable import RecoverableError
from clover_cli.agent.changes import ChangeTracker
from clover_cli.agent.config import AgentConfig
from clover_cli.agent.context import truncate_output
from clover_cli.agent.controls import AgentControls
from clover_cli.agent.fitting import ContextFitting
from clover_cli.agent.events import (AgentError, AgentEvent, Notice, ToolCallProposed, ToolFinished,
                                     TurnFinished, TurnStarted)
from clover_cli.agent.instructions import system_prompt
from clover_cli.agent.jsonsafe import JSONLimitError, loads as json_loads, scrub
from clover_cli.agent.markup import HeldCalls, describe_attempt
from clover_cli.agent.parsing import FormatError, ParsedCall, parse_tool_calls
from clover_cli.agent.prompt_files import observation
from clover_cli.agent.session import SessionLog, find_session, load_messages, new_session_id
from clover_cli.agent.stats import TurnStats
from clover_cli.agent.toolexec import CallContext, execute_call
from clover_cli.tools.base import ToolResult


class Agent(AgentControls, ContextFitting):
    """One conversation with one model over one repository (front ends see it as
    interface.AgentSession; its control members are in controls.py, keeping the conversation
    inside the context window in fitting.py)."""

    def __init__(self, backend: ModelBackend, config: AgentConfig) -> None:
        from clover_cli.agent.mcp import attach  # the user's MCP servers' tools (docs/mcp.md)
        from clover_cli.tools.toolset import ToolSet

        self.backend = backend
        self.config = config
        self.root: Path = config.root
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        resumed = config.session_id is not None and _session_exists(self.root, config.session_id)
        self.session_id = config.session_id or new_session_id()
        self._log = SessionLog(self.root, self.session_id, enabled=config.save_session)
        external, self._mcp_notices = attach()
        self.toolset = ToolSet(external)  # this agent's own: no other agent sees its MCP tools
        self.policy = ApprovalPolicy(self.root, config.approval, config.shell_allow, self.toolset.is_writing)
        self.tools: list[dict] = [t for t in self.toolset.schemas()
                                  if config.tool_names is None or t["function"]["name"] in config.tool_names]
        self._schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in self.tools}
        self._changes = ChangeTracker(self.root)
        self._call_ids = itertools.count(1)
        self._task = ""
        self.turns = 0
        self._messages: list[dict[str, Any]] = [{"role": "system", "content": self.system_prompt()}]
        if resumed:
            self._restore()
        else:
            self._log.hold()  # written with the first turn: no file for a session where nothing was sent
            self._log.append({"type": "meta", "session_id": self.session_id, "root": str(self.root),
                              "model": backend.info, "approval": config.approval, **config.meta})
            self._log.append({"type": "message", "message": self._messages[0]})

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def resume(cls, backend: ModelBackend, config: AgentConfig, session_id: str = "last") -> "Agent":
        """Continues a saved session (`last` = the most recent one). Raises SessionError."""
        path = find_session(config.root, session_id)
        config.session_id = path.stem
        return cls(backend, config)

    def _restore(self) -> None:
        meta, messages, turns = load_messages(self._log.path)
        self.turns = turns
        if messages:
            fresh_system = self._messages[0]
            self._messages = [fresh_system] + [m for m in messages if m.get("role") != "system"]
        for rec in _records(self._log.path, "original"):
            self._changes.originals.setdefault(rec["path"], rec.get("content"))
        users = [m for m in self._messages if m.get("role") == "user" and not m.get("compaction")]
        self._task = users[-1]["content"] if users else ""
        self._log.append({"type": "resume", "session_id": self.session_id})
        self._log.append({"type": "reset", "messages": self._messages})

    def system_prompt(self) -> str:
        """The system prompt: prompts/agent_system.md, AGENTS.md files, extra instructions."""
        return system_prompt(self.root, self.config.extra_instructions)

    # -- conversation -----------------------------------------------------------------------------
    def _add(self, message: dict[str, Any]) -> None:
        self._messages.append(message)
        self._log.append({"type": "message", "message": message})

    def _before_write(self, paths: list[str]) -> None:
        for rel, text in self._changes.snapshot(paths):
            self._log.append({"type": "original", "path": rel, "content": text})

    # -- the turn ---------------------------------------------------------------------------------
    def run_turn(self, user_text: str) -> Iterator[AgentEvent]:
        """Runs the model and its tool calls until it answers without calls or a limit stops it."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("a turn is already running")
        finished = False
        try:
            for event in self._turn(scrub(user_text)):
                finished = finished or isinstance(event, TurnFinished)
                yield event
        except Exception as e:  # a bug must not end the stream without its turn_end (docs/agent.md)
            if finished:
                raise
            msg = f"internal error: {type(e).__name__}: {e}"[:500]
            stats = TurnStats().as_dict()
            yield AgentError(msg, fatal=True)
            try:
                self._log.append({"type": "turn_end", "reason": "error", "final_text": msg, "stats": stats})
            except Exception:  # the log itself may be what failed
                pass
            yield TurnFinished("error", msg, stats)
        finally:
            self._lock.release()

    def _turn(self, user_text: str) -> Iterator[AgentEvent]:
        """One user turn: model steps (each a model call, then its tool calls) until the model
        answers without calls, or a limit, an error or the user ends it."""
        cfg = self.config
        self._cancel.clear()
        self.turns += 1
        stats = TurnStats()
        self._log.append({"type": "turn_start", "turn": self.turns, "user_text": user_text})
        yield TurnStarted(self.turns, user_text)
        while self._mcp_notices:  # an MCP server that did not start, once
            yield Notice(self._mcp_notices.pop(0))
        self._task = user_text
        self._add({"role": "user", "content": user_text})
        run = _TurnRun(stats)
        while True:
            if self._cancel.is_set():
                yield from self._finish("cancelled", "", stats)
                return
            if stats.steps >= cfg.max_steps:
                msg = observation("max_steps_user", steps=stats.steps)
                yield from self._notice(msg)  # kept in the session file, as the user saw it
                yield from self._finish("max_steps", msg, stats)
                return
            stats.steps += 1
            completion = yield from self._call_model(run)
            if completion is _ASK_AGAIN:
                continue
            if completion is None:  # the turn ended there
                return
            run.recoveries = 0
            stats.add_model(completion.stats)
            if (yield from self._take_completion(completion, run)):
                return

    def _call_model(self, run: "_TurnRun"):
        """One model call, its stream passed on; the Completion, `_ASK_AGAIN` after a recoverable
        failure (compacted, the partial answer kept), or None when the call ended the turn."""
        run.held = HeldCalls()
        try:
            yield from self._fit_context()
            run.stats.context_tokens = self.backend.count_tokens(self._messages, self.tools)
            run.stats.context_window = self.config.context_window or self.backend.context_window
            info = self.backend.info
            run.stats.placement = {k: info[k] for k in ("device", "dtype", "weight_format") if k in info}
            run.stats.scripted = str(info.get("name", "")).startswith("replay:")
            completion = None
            for item in self.backend.stream(self._messages, self.tools,
                                            max_new_tokens=self.config.max_new_tokens, cancel=self._cancel):
                if isinstance(item, Completion):
                    completion = item
                else:
                    run.held.note(item)
                    yield item
        except RecoverableError as e:  # compact / keep the partial answer, then ask again
            yield from run.held.release()  # call text hidden while streaming is shown (markup.py)
            run.recoveries += 1
            if run.recoveries <= 2:
                yield from self._notice(str(e))
                yield from (self._compact() if e.compact else ())
                for role, text in (("assistant", e.partial_text), ("user", e.feedback)):
                    if text:
                        self._add({"role": role, "content": text})
                return _ASK_AGAIN
            yield AgentError(str(e), fatal=True)
            yield from self._finish("error", str(e), run.stats)
            return None
        except Exception as e:  # BackendError, or a model bug: the session survives either way
            msg = str(e) if isinstance(e, BackendError) else f"model call failed: {type(e).__name__}: {e}"
            yield from run.held.release()
            partial = parse_tool_calls(scrub(getattr(e, "partial_text", ""))).text  # kept, as on a cancel
            if partial:
                run.stats.add_model(getattr(e, "stats", {}))
                self._add({"role": "assistant", "content": partial, "cut_off": True})
            yield AgentError(msg, fatal=True)
            yield from self._finish("error", partial or msg, run.stats)
            return None
        if completion is None:
            yield from self._finish("error", "the model backend returned nothing", run.stats)
        return completion

    def _take_completion(self, completion: Completion, run: "_TurnRun"):
        """Record the model's answer and run its calls; True when the turn ended here."""
        stats = run.stats
        text = scrub(completion.text)  # lone surrogates never reach the log
        parsed = parse_tool_calls(text, self._schemas)
        if completion.finish_reason == "cancelled" or self._cancel.is_set():
            yield from run.held.release()
            if parsed.text:  # keep what was said; unfinished calls are not run
                self._add({"role": "assistant", "content": parsed.text, "cut_off": True})
            yield from self._finish("cancelled", parsed.text, stats)
            return True
        if (completion.finish_reason == "length" and not completion.tool_calls and parsed.calls
                and parsed.cut_off):  # never run a call cut off mid-argument
            parsed.calls.pop()
            parsed.errors.append(FormatError(observation("parse_cut_off"),
                                             text[text.rfind("<tool_call>"):][:300]))
        calls, errors = self._calls_of(completion, parsed.calls, parsed.errors)
        yield from (() if calls else run.held.release())  # a step that runs no call shows its call text
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            assistant["tool_calls"] = [{"id": cid, "type": "function",
                                        "function": {"name": c.name, "arguments": c.arguments}}
                                       for cid, c in calls]
        self._add(assistant)
        if not calls and not errors:  # an answer cut by the token limit is not "done"
            yield from self._finish("truncated" if completion.finish_reason == "length" else "done",
                                    parsed.text, stats)
            return True
        for cid, call in calls:
            result = yield from self._run_call(cid, call, stats)
            run.tool_errors = 0 if result.ok else run.tool_errors + 1
        if self._cancel.is_set():  # every call has its result message; nothing more runs
            yield from self._finish("cancelled", "", stats)
            return True
        yield from self._report_format_errors(errors, run)
        return (yield from self._over_error_limits(run))

    def _report_format_errors(self, errors: list[FormatError], run: "_TurnRun"):
        """Tell the model (and the user) about each malformed call of this step."""
        if errors and not run.format_errors:  # a new run of malformed calls
            run.malformed = []
        for err in errors:
            self._add({"role": "user", "content": observation(
                "format_error", message=err.message, snippet=err.snippet), "format_error": True})
            self._log.append({"type": "format_error", "message": err.message, "snippet": err.snippet})
            tried = describe_attempt(err)
            run.malformed.append(tried)
            yield from self._notice(f"Tool call not run: {tried}.")  # kept; also ends the hidden call text
        run.format_errors = run.format_errors + 1 if errors else 0
        run.stats.format_errors += len(errors)

    def _over_error_limits(self, run: "_TurnRun"):
        """End the turn after too many malformed calls or failed tool calls in a row."""
        cfg = self.config
        if run.format_errors >= cfg.max_format_errors:
            msg = observation("format_errors_user", count=run.format_errors) + "".join(
                f"\n  {k}. {tried}" for k, tried in enumerate(run.malformed[-10:], 1))
            yield AgentError(msg)
            yield from self._finish("format_errors", msg, run.stats)
            return True
        if run.tool_errors >= cfg.max_consecutive_errors:
            msg = observation("errors_user", count=run.tool_errors)
            yield AgentError(msg)
            yield from self._finish("errors", msg, run.stats)
            return True
        return False

    def _calls_of(self, completion: Completion, text_calls: list[ParsedCall],
                  errors: list[FormatError]) -> tuple[list[tuple[str, ParsedCall]], list[FormatError]]:
        """(call id, call) pairs: native calls when the server sent them, else the parsed text."""
        if not completion.tool_calls:
            return [(self._new_call_id(), c) for c in text_calls], list(errors)
        calls, errs = [], []
        for nc in completion.tool_calls:
            name, raw_args = scrub(nc.name or ""), scrub(nc.arguments or "")
            try:
                args = json_loads(raw_args) if raw_args.strip() else {}
            except JSONLimitError as exc:
                errs.append(FormatError(observation(exc.key, limit=exc.limit), raw_args[:300]))
                continue
            except ValueError:
                args = None
            if not name or not isinstance(args, dict):
                errs.append(FormatError(f"the arguments of {name or 'a tool call'} are not a JSON object",
                                        raw_args[:300]))
                continue
            calls.append((scrub(nc.id or "") or self._new_call_id(), ParsedCall(name, args)))
        return calls, errs

    def _new_call_id(self) -> str:
        return f"call_{self.turns}_{next(self._call_ids)}"

    def _run_call(self, call_id: str, call: ParsedCall, stats: "TurnStats") -> Iterator[AgentEvent]:
        """Runs one call (unless cancelled) and adds its result message; returns the ToolResult."""
        yield ToolCallProposed(call_id, call.name, dict(call.arguments))
        self._log.append({"type": "tool_call", "call_id": call_id, "name": call.name, "arguments": call.arguments})
        if self._cancel.is_set():
            result = ToolResult(False, observation("cancelled_tool"), {"error": "cancelled"})
        else:
            ctx = CallContext(self.root, self.policy, self.config.protected_paths, self._cancel,
                              self.config.tool_timeout, self._before_write, self._log.append, self.toolset)
            result = yield from execute_call(call_id, call.name, dict(call.arguments), ctx)
        stats.tool_calls += 1
        output = truncate_output(result.output or observation("empty_output"), self.config.max_output_chars)
        details = {k: v for k, v in (result.details or {}).items() if _jsonable(v)}
        yield ToolFinished(call_id, call.name, result.ok, output, details)
        self._log.append({"type": "tool_result", "call_id": call_id, "name": call.name, "ok": result.ok,
                          "output": output, "details": details})
        self._add({"role": "tool", "tool_call_id": call_id, "name": call.name, "content": output})
        return result

    def _finish(self, reason: str, final_text: str, stats: "TurnStats") -> Iterator[AgentEvent]:
        data = stats.as_dict()
        self._log.append({"type": "turn_end", "reason": reason, "final_text": final_text, "stats": data})
        yield TurnFinished(reason, final_text, data)  # type: ignore[arg-type]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _session_exists(root: Path, session_id: str) -> bool:
    from clover_cli.agent.session import sessions_dir
    return (sessions_dir(root) / f"{session_id}.jsonl").is_file()


def _records(path: Path, kind: str) -> Iterator[dict]:
    from clover_cli.agent.session import SessionError, read_records  # invalid UTF-8 is skipped
    try:
        yield from read_records(path, kind)
    except SessionError:
        return


_ASK_AGAIN = object()  # a model call to make again (after a recoverable failure)


@dataclass
class _TurnRun:
    """What one turn counts across its model steps."""

    stats: TurnStats
    format_errors: int = 0  # steps in a row with malformed calls
    tool_errors: int = 0  # failed tool calls in a row
    recoveries: int = 0  # recoverable model-call failures in a row
    malformed: list[str] = field(default_factory=list)  # what each malformed call in a row tried
    held: HeldCalls = field(default_factory=HeldCalls)  # the model step's hidden call text
