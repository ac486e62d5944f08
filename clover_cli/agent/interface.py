"""What a front end may use of the agent layer (docs/design.md, Boundaries: tui -> agent only).

`AgentSession` lists exactly the members the TUI calls on an agent; `Agent` implements it (the
control members live in agent/controls.py). A front end types its agent as `AgentSession` and
never reaches into the model backend or the tools: the threshold, the model's facts, the prompt's
size and the repository's branch all come through here. The few repository facts a front end
needs before any session exists (the file list of the `@` picker, a state file) are the module
functions below, so that front ends import no `clover_cli.tools` module themselves.
tests/agent/test_interface.py holds `Agent` to this protocol.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Protocol, runtime_checkable

from clover_cli.agent.events import AgentEvent


@runtime_checkable
class AgentSession(Protocol):
    """One conversation with one model over one repository, as a front end sees it."""

    session_id: str

    # -- the turn (run it through clover_cli.agent.driver.TurnDriver on a worker thread) --------
    def run_turn(self, user_text: str) -> Iterator[AgentEvent]:
        """Blocking generator of the turn's events, ending with one TurnFinished."""
        ...

    def compact(self) -> Iterator[AgentEvent]:
        """Summarise the older conversation; Notices (and an AgentError if the model fails)."""
        ...

    def cancel(self) -> None:
        """Stop the running turn or compaction at its next block or tool poll (thread-safe)."""
        ...

    # -- the conversation and its files ---------------------------------------------------------
    @property
    def session_path(self) -> Path: ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        """A copy of the conversation (OpenAI-style message dicts)."""
        ...

    @property
    def changed_files(self) -> list[str]: ...

    def diff(self) -> str: ...

    def clear(self) -> None: ...

    def undo(self) -> Any:
        """The restore's result: `.ok` and `.output` (a tools ToolResult)."""
        ...

    # -- settings -------------------------------------------------------------------------------
    @property
    def approval(self) -> str: ...

    def set_approval(self, mode: str) -> None:
        """One of clover_cli.agent.config.APPROVAL_MODES; ValueError otherwise."""
        ...

    def set_threshold(self, value: float) -> float:
        """The commit threshold from the next block on; checked by config.check_threshold."""
        ...

    # -- facts for the status bar ---------------------------------------------------------------
    def model_info(self) -> dict[str, Any]:
        """name, is_diffusion, block_size, threshold, context_window."""
        ...

    def context_tokens(self, pending: str = "") -> int | None:
        """How many tokens the conversation takes now (with `pending` as one more user
        message); None when it cannot be counted."""
        ...

    def repo_branch(self) -> str | None:
        """The repository's current git branch, or None."""
        ...

    # -- lifetime -------------------------------------------------------------------------------
    def reopen(self, session_id: str) -> "AgentSession":
        """Another saved session (an id or "last") on the same loaded model; SessionError if none."""
        ...

    def close(self, successor: "AgentSession | None" = None) -> None:
        """Release the model, unless `successor` runs on the same one."""
        ...


def repo_files(root: Path) -> list[str]:
    """The repository's files, repo-relative (git's list, or a walk); [] when unreadable."""
    from clover_cli.tools.files import repo_files as files
    try:
        return files(Path(root))
    except Exception:  # a broken repository: no suggestions, never a crash
        return []


def repo_branch(root: Path) -> str | None:
    """The current git branch of `root`, or None (not a repository, git missing, broken repo)."""
    from clover_cli.tools.gitutil import current_branch
    try:
        return current_branch(Path(root)) or None
    except Exception:  # a broken repository must not stop the session
        return None


def config_file(name: str) -> Path:
    """A file in the user's Clover config folder, `$XDG_CONFIG_HOME/clover` (tools/statedir.py
    resolves it, for every layer); not created."""
    from clover_cli.tools.statedir import config_home
    return config_home() / name


def state_file(root: Path, name: str) -> Path:
    """A file in Clover's per-repository state folder (outside the repository; docs/design.md,
    "Trust and state"). The folder is created; OSError if it cannot be."""
    from clover_cli.tools.statedir import repo_state_dir
    return repo_state_dir(root) / name
