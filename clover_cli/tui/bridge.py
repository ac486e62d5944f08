"""The seam between the UI thread and the agent: messages posted from worker threads.

Worker threads (Textual `@work(thread=True)`) call the agent and post these messages; the UI thread
only renders them. Nothing here touches widgets.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.message import Message


@dataclass(frozen=True)
class SessionOptions:
    """What the TUI opens: model spec, repository root, approval mode, threshold, session."""

    model: str
    root: Path
    approval: str = "ask"
    threshold: float = 0.95
    resume: str | None = None  # "last" or a session id
    backend_options: dict = field(default_factory=dict)  # extra make_backend options (tests: delay)


class AgentEventMessage(Message):
    """One agent event, posted from the worker thread."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event


class AgentReady(Message):
    """The model is loaded and the agent exists."""

    def __init__(self, agent: Any, info: dict, branch: str | None, resumed: bool, note: str = "") -> None:
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
    """One line for the user from an exception (our error types already read well)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if name in ("ModelLoadError", "BackendError", "SessionError", "SpecError", "ConfigError", "ValueError"):
        return text or name
    return f"{name}: {text}" if text else name


def open_agent(opts: SessionOptions, resume: str | None = None,
               backend: Any = None) -> tuple[Any, bool, str]:
    """Load the backend (unless given) and create or resume the agent. Runs in a worker thread.

    Returns (agent, resumed, note). `--continue` with no saved session starts a new one and says
    so in `note`; a named session that does not exist is an error.
    """
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.backends import make_backend
    from clover_cli.agent.session import SessionError

    if backend is None:
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


def git_branch(root: Path) -> str | None:
    """The current git branch of `root`, or None (not a repository, tools not installed)."""
    try:
        from clover_cli.tools.gitutil import current_branch
    except ImportError:
        return None
    try:
        return current_branch(root) or None
    except Exception:  # a broken repository must not stop the session
        return None


def context_tokens(agent: Any) -> int | None:
    """How many tokens the conversation takes now (the backend's count). Runs in a worker thread."""
    try:
        return int(agent.backend.count_tokens(agent.messages, agent.tools))
    except Exception:  # a count is nice to have; never fail a turn over it
        return None
