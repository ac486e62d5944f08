"""The seam between the UI thread and the agent: messages posted from worker threads.

Worker threads (the turn driver, clover_cli/agent/driver.py, and Textual `@work(thread=True)`
workers) call the agent and post these messages; the UI thread only renders them. The agent is
seen only through `AgentSession` (clover_cli/agent/interface.py; docs/design.md, Boundaries).
Nothing here touches widgets.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.message import Message

from clover_cli.agent.config import DEFAULT_APPROVAL, DEFAULT_THRESHOLD
from clover_cli.agent.events import AgentEvent
from clover_cli.agent.interface import AgentSession


def measured_model(spec: str) -> bool:
    """True for a model the in-process engine runs (it measures block size, TPF and speed); a
    replay or remote model's figures are not measured and are not shown (docs/tui.md)."""
    return not str(spec).startswith(("replay:", "openai:"))


@dataclass(frozen=True)
class SessionOptions:
    """What the TUI opens: model spec, repository root, approval mode, threshold, session."""

    model: str
    root: Path
    approval: str = DEFAULT_APPROVAL
    threshold: float | None = DEFAULT_THRESHOLD  # None: none set (the family's own, else the default)
    resume: str | None = None  # "last" or a session id
    backend_options: dict = field(default_factory=dict)  # extra make_backend options (tests: delay)
    warnings: tuple[str, ...] = ()  # settings that were ignored (clover_cli/config.py), shown in the chat log


class AgentEventMessage(Message):
    """One agent event, posted from the worker thread; `context`: the conversation's size in
    tokens when the event is a TurnStarted (the prompt being answered counted), else None."""

    def __init__(self, event: AgentEvent, context: int | None = None) -> None:
        super().__init__()
        self.event = event
        self.context = context


class AgentReady(Message):
    """The model is loaded and the agent exists."""

    def __init__(self, agent: AgentSession, info: dict, branch: str | None, resumed: bool, note: str = "") -> None:
        super().__init__()
        self.note = note
        self.agent = agent
        self.info = info
        self.branch = branch
        self.resumed = resumed


class AgentFailed(Message):
    """Loading the model or opening the session failed; `message` is for the user."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


class TaskDone(Message):
    """A non-streaming agent call (undo, diff, clear) finished with `value` or `error`."""

    def __init__(self, kind: str, value: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.value = value
        self.error = error


def error_text(exc: BaseException) -> str:
    """One line for the user from an exception (our error types already read well), the API key
    scrubbed (clover_cli/agent/redact.py)."""
    from clover_cli.agent.redact import scrub
    text = scrub(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
    name = type(exc).__name__
    if name in ("ModelLoadError", "BackendError", "SessionError", "SpecError", "ConfigError", "ValueError"):
        return text or name
    return f"{name}: {text}" if text else name


def open_agent(opts: SessionOptions, resume: str | None = None,
               reuse: AgentSession | None = None) -> tuple[AgentSession, bool, str]:
    """Load the model and create or resume the agent. Runs in a worker thread.

    Returns (agent, resumed, note). With `reuse`, the session `resume` is reopened on reuse's
    loaded model (/sessions ID). `--continue` with no saved session starts a new one and says so
    in `note`; a named session that does not exist is an error.
    """
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.backends import make_backend
    from clover_cli.agent.session import SessionError

    if reuse is not None and resume:
        return reuse.reopen(resume), True, ""
    backend = make_backend(opts.model, threshold=opts.threshold, **opts.backend_options)
    cfg = AgentConfig(root=opts.root, approval=opts.approval)
    if resume:
        try:
            return Agent.resume(backend, cfg, resume), True, ""
        except SessionError as exc:
            if resume != "last":
                raise
            return Agent(backend, cfg), False, f"{exc}; started a new session."
    return Agent(backend, cfg), False, ""
