"""Clover as an Agent Client Protocol agent (JSON-RPC on stdio), through the
`agent-client-protocol` SDK: editors that speak ACP (Zed, JetBrains, Toad) drive the same agent
loop as the TUI and `clover run` (docs/acp.md).

- `initialize` / `session/new` (one Agent per session, rooted at the client's `cwd`);
- `session/prompt`: the turn runs in a worker thread; each committed block of text is an
  `agent_message_chunk` (thinking: `agent_thought_chunk`; tool-call markup is left out, the call
  is shown as a tool call instead; a step that ends without a call shows its call text with a
  notice, clover_cli/agent/markup.py), each tool call a `tool_call` (pending) then a
  `tool_call_update` (completed / failed, with the output the model saw);
- an approval the agent needs is a `session/request_permission` (allow once / always / reject);
- `session/cancel` cancels the turn (it ends with stop reason `cancelled`).

`initialize` and `session/new` answer at once: the model loads in the background (`clover acp`
starts it), and a session's agent is made at its first prompt, which waits for the load; a load
that failed is that prompt's protocol error. Everything shown to the editor passes through
clover_cli/agent/shown.py (the API key scrubbed, a silent server's wait announced).
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

STOP_REASONS = {"done": "end_turn", "cancelled": "cancelled", "max_steps": "max_turn_requests",
                "truncated": "max_tokens"}
KINDS = {"read_file": "read", "list_files": "search", "grep": "search", "repo_map": "search",
         "run_shell": "execute", "apply_patch": "edit", "edit_file": "edit", "write_file": "edit"}
OUTPUT_LIMIT = 4000


def _title(name: str, args: Any) -> str:
    text = " ".join(json.dumps(dict(args), ensure_ascii=False, default=str).split())
    return f"{name} {text if len(text) <= 80 else text[:77] + '...'}"


class _Pending:
    """A session whose agent is not made yet (the model may still be loading)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cancelled = False


class CloverAcpAgent:
    """One ACP connection; sessions are Clover agents made by `make_agent(root, session_id)` at
    their first prompt (it may block until the model is loaded, and raises if the load failed)."""

    def __init__(self, make_agent: Callable[[Path, str], Any], version: str = "0") -> None:
        self.make_agent = make_agent
        self.version = version
        self.conn: Any = None
        self.sessions: dict[str, Any] = {}  # session id -> Agent, or _Pending before its first prompt

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> Any:
        from acp import PROTOCOL_VERSION, InitializeResponse
        from acp.schema import AgentCapabilities, Implementation, PromptCapabilities
        return InitializeResponse(
            protocol_version=min(int(protocol_version), PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False,
                                                 prompt_capabilities=PromptCapabilities(embedded_context=True)),
            agent_info=Implementation(name="clover", title="Clover", version=self.version))

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> Any:
        from acp import NewSessionResponse, RequestError

        from clover_cli.agent.session import new_session_id
        root = Path(cwd)
        if not root.is_dir():
            raise RequestError.invalid_params({"cwd": f"{cwd} is not a directory"})
        session_id = new_session_id()
        self.sessions[session_id] = _Pending(root)
        return NewSessionResponse(session_id=session_id)

    async def authenticate(self, method_id: str, **kwargs: Any) -> Any:
        return None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        agent = self.sessions.get(session_id)
        if isinstance(agent, _Pending):
            agent.cancelled = True
        elif agent is not None:
            agent.cancel()

    async def prompt(self, session_id: str, prompt: list, **kwargs: Any) -> Any:
        from acp import PromptResponse, RequestError
        agent = self.sessions.get(session_id)
        if agent is None:
            raise RequestError.invalid_params({"sessionId": f"no session {session_id}"})
        text = "\n".join(_block_text(b) for b in prompt).strip()
        if not text:
            raise RequestError.invalid_params({"prompt": "empty prompt"})
        loop = asyncio.get_running_loop()
        if isinstance(agent, _Pending):
            agent.cancelled = False
            try:  # waits for the model's load
                made = await loop.run_in_executor(None, self.make_agent, agent.root, session_id)
            except Exception as exc:  # noqa: BLE001 - the load failed: this prompt's error, in one line
                raise RequestError.internal_error({"message": _one_line(exc)}) from None
            self.sessions[session_id] = made
            if agent.cancelled:
                return PromptResponse(stop_reason="cancelled")
            agent = made
        try:
            reason = await loop.run_in_executor(None, self._turn, agent, session_id, text, loop)
        except Exception as exc:  # noqa: BLE001 - a failed turn is one protocol error, scrubbed
            raise RequestError.internal_error({"message": _one_line(exc)}) from None
        return PromptResponse(stop_reason=STOP_REASONS.get(reason, "end_turn"))

    # -- the turn, in a worker thread ---------------------------------------------------------------
    def _turn(self, agent: Any, session_id: str, text: str, loop: asyncio.AbstractEventLoop) -> str:
        from acp import (start_tool_call, text_block, tool_content, update_agent_message_text,
                         update_agent_thought_text, update_tool_call)
        from clover_cli.agent import events as ev
        from clover_cli.agent.markup import UNFINISHED_NOTICE
        from clover_cli.agent.shown import ShownEvents

        def send(update: Any) -> None:
            asyncio.run_coroutine_threadsafe(self.conn.session_update(session_id, update), loop).result()

        reason = "error"
        sent: list[str] = []  # the answer text sent this turn

        def show(e: Any) -> None:
            nonlocal reason
            if isinstance(e, ev.BlockText):  # marked by the agent (markup.py); call text is not sent
                if e.kind == "thinking":
                    send(update_agent_thought_text(e.text))
                elif e.kind != "call":
                    sent.append(e.text)
                    send(update_agent_message_text(e.text))
                if e.kind == "unrun_call":
                    send(update_agent_thought_text(f"[{UNFINISHED_NOTICE}]\n"))
            elif isinstance(e, ev.ToolCallProposed):
                send(start_tool_call(e.call_id, _title(e.name, e.arguments), kind=KINDS.get(e.name, "other"),
                                     status="pending", raw_input=dict(e.arguments)))
            elif isinstance(e, ev.ApprovalRequested):
                asyncio.run_coroutine_threadsafe(self._ask(session_id, e), loop)  # answers e.future
            elif isinstance(e, ev.ToolFinished):
                out = e.output if len(e.output) <= OUTPUT_LIMIT else e.output[:OUTPUT_LIMIT] + "\n[...]"
                send(update_tool_call(e.call_id, status="completed" if e.ok else "failed",
                                      content=[tool_content(text_block(out))], raw_output={"ok": e.ok}))
            elif isinstance(e, ev.AgentError):
                send(update_agent_message_text(f"\n[error: {e.message}]\n"))
            elif isinstance(e, ev.Notice):
                send(update_agent_thought_text(f"[{e.message}]\n"))
            elif isinstance(e, ev.TurnFinished):
                reason = e.reason
                if reason not in STOP_REASONS:  # the final text once: not again when it was sent as it came
                    said = e.final_text.strip()
                    again = "" if not said or said in "".join(sent) else f": {e.final_text}"
                    send(update_agent_message_text(f"\n[stopped: {reason}{again}]\n"))

        events = ShownEvents(show, agent)
        try:
            for e in agent.run_turn(text):
                events.event(e)
        finally:
            events.end()
        return reason

    async def _ask(self, session_id: str, e: Any) -> None:
        """A permission request for one approval; the agent's future gets the answer."""
        from acp.schema import PermissionOption, ToolCallUpdate
        from clover_cli.agent.events import ApprovalAnswer
        options = [PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="always", name=f"Always allow {e.always_key}"[:60],
                                    kind="allow_always"),
                   PermissionOption(option_id="no", name="Reject", kind="reject_once")]
        if not e.always_key:
            options.pop(1)
        call = ToolCallUpdate(tool_call_id=e.call_id, title=_title(e.name, e.arguments),
                              kind=KINDS.get(e.name, "other"), status="pending",
                              raw_input={"summary": e.summary[:OUTPUT_LIMIT], **dict(e.arguments)})
        try:
            resp = await self.conn.request_permission(session_id, call, options)
            chosen = getattr(resp.outcome, "option_id", None) if resp.outcome.outcome == "selected" else None
        except Exception:  # noqa: BLE001 - a client that cannot answer: the call is not run
            chosen = None
        if not e.future.done():
            e.future.set_result(ApprovalAnswer(chosen if chosen in ("yes", "always") else "no"))


def _one_line(exc: BaseException) -> str:
    """An exception as one line for the editor, the API key scrubbed."""
    from clover_cli.agent.redact import scrub
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text)


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind == "resource_link":
        return f"[{getattr(block, 'name', '')}]({getattr(block, 'uri', '')})"
    if kind == "resource":
        res = getattr(block, "resource", None)
        body = getattr(res, "text", None)
        return f"{getattr(res, 'uri', '')}:\n{body}" if body is not None else f"[{getattr(res, 'uri', '')}]"
    return ""
