"""The agent's control members (a mixin of `Agent`, agent.py): everything a front end calls
besides the turn itself, as listed by `AgentSession` (interface.py).

These are small and run on the caller's thread; the ones that touch the model (the threshold,
the token count) go through the backend here, so a front end never holds the backend
(docs/design.md, Boundaries: tui -> agent only).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clover_cli.agent.config import APPROVAL_MODES, check_threshold
from clover_cli.tools.base import ToolResult


@runtime_checkable
class ControlsHost(Protocol):
    """What `AgentControls` reads and writes on the class it is mixed into (`Agent`, agent.py);
    tests/agent/test_controls_host.py holds `Agent` to it."""

    session_id: str
    backend: Any  # the ModelBackend: info, threshold, count_tokens, reset_cache, close
    config: Any  # the AgentConfig: approval, context_window, session_id, meta
    policy: Any  # the ApprovalPolicy: mode
    root: Path
    tools: list[dict]
    _log: Any  # the SessionLog: path, written, append
    _messages: list[dict[str, Any]]
    _changes: Any  # the ChangeTracker: changed_files, diff
    _cancel: Any  # a threading.Event
    _task: str

    @classmethod
    def resume(cls, backend: Any, config: Any, session_id: str = "last") -> Any: ...


class AgentControls:
    """Mixed into Agent, which provides what `ControlsHost` lists."""

    # -- public state -----------------------------------------------------------------------------
    @property
    def session_path(self) -> Path:
        return self._log.path

    @property
    def messages(self) -> list[dict[str, Any]]:
        """A copy of the conversation (OpenAI-style message dicts)."""
        return [dict(m) for m in self._messages]

    @property
    def changed_files(self) -> list[str]:
        """Repo-relative paths the agent's edits changed this session."""
        return self._changes.changed_files()

    def diff(self) -> str:
        """Unified diff of everything the agent's edits changed this session."""
        return self._changes.diff()

    @property
    def approval(self) -> str:
        """The approval mode in force."""
        return self.config.approval

    def model_info(self) -> dict[str, Any]:
        """What front ends show about the model: name, is_diffusion, block_size, threshold,
        context_window (the configured window when one is set)."""
        info = dict(self.backend.info)
        if self.config.context_window:
            info["context_window"] = self.config.context_window
        return info

    def context_tokens(self, pending: str = "") -> int | None:
        """How many tokens the conversation takes now (the backend's count), with `pending` as
        one more user message (the prompt a turn is about to send); None if it cannot be
        counted: a figure for the status bar must never fail a turn."""
        messages = self._messages + ([{"role": "user", "content": pending}] if pending else [])
        try:
            return int(self.backend.count_tokens(messages, self.tools))
        except Exception:
            return None

    def repo_branch(self) -> str | None:
        """The repository's current git branch, or None."""
        from clover_cli.agent.interface import repo_branch
        return repo_branch(self.root)

    # -- control ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stops the running turn between engine steps (thread-safe)."""
        self._cancel.set()

    def set_approval(self, mode: str) -> None:
        if mode not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)}")
        self.config.approval = mode
        self.policy.mode = mode
        self._log.append({"type": "approval_mode", "mode": mode})

    def set_threshold(self, value: float) -> float:
        """Sets the commit threshold from the next block on (the engine's one (0, 1] check;
        ValueError otherwise). Returns the value set."""
        value = check_threshold(value)
        self.backend.threshold = value
        return value

    def clear(self) -> None:
        """Forgets the conversation (the session file keeps the history) and what the backend
        kept of its prompts (the engine's prefix cache)."""
        self._messages = self._messages[:1]
        self._task = ""
        self._log.append({"type": "reset", "messages": self._messages})
        self._reset_backend_cache()

    def _reset_backend_cache(self) -> None:
        try:
            self.backend.reset_cache()
        except Exception:  # a cache that cannot be dropped costs memory, never the session
            pass

    def undo(self) -> ToolResult:
        """Restores the files of the agent's last edit from its checkpoint."""
        from clover_cli.tools.checkpoints import CheckpointStore

        result = CheckpointStore(self.root).undo()
        self._log.append({"type": "undo", "ok": result.ok, "output": result.output})
        return result

    # -- lifetime ---------------------------------------------------------------------------------
    def reopen(self, session_id: str):
        """Another saved session (an id or "last") on this agent's loaded model, with the same
        settings. Raises SessionError when there is no such session."""
        config = dataclasses.replace(self.config, session_id=None, meta=dict(self.config.meta))
        if session_id == self.session_id and not self._log.written:  # this session, nothing sent yet
            config.session_id = session_id
            agent = type(self)(self.backend, config)
        else:
            agent = type(self).resume(self.backend, config, session_id)
        self._reset_backend_cache()  # another conversation on the same model
        return agent

    def close(self, successor: Any = None) -> None:
        """Releases the model (its memory, connections), unless `successor` runs on it."""
        if successor is not None and getattr(successor, "backend", None) is self.backend:
            return
        try:
            self.backend.close()
        except Exception:  # closing is best effort; the session file is already written
            pass
