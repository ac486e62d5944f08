"""The agent's configuration (one dataclass, validated on creation)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# the engine's threshold default and its one check, re-exported for front ends that may import the
# agent but not the engine (the TUI: docs/design.md, boundaries)
from clover_cli.engine.config import DEFAULT_THRESHOLD, check_threshold  # noqa: F401

# The approval modes, written once (docs/design.md, "Agent"; docs/security.md): least to most
# permissive, the order in which a trusted repository may lower but never raise the mode.
APPROVAL_ORDER = ("read-only", "ask", "auto-edit", "yolo")
DEFAULT_APPROVAL = "ask"
APPROVAL_MODES = APPROVAL_ORDER[1:] + APPROVAL_ORDER[:1]  # as listed to users: ask ... read-only
HEADLESS_APPROVAL_MODES = tuple(m for m in APPROVAL_MODES if m != "ask")  # nobody to ask in `clover run`

# Model calls in one turn before it stops with reason "max_steps"; the one default that
# `clover run`, `clover fix` and `clover swebench` show (commands/options.py's max_steps_option).
DEFAULT_MAX_STEPS = 30


@dataclass
class AgentConfig:
    """Settings of one agent session.

    approval: "ask" (edits and shell need a yes), "auto-edit" (edits apply, shell asks),
    "yolo" (everything runs), "read-only" (no writes; only allow-listed read-only shell commands).
    shell_allow: shell command prefixes that run without asking (outside read-only).
    protected_paths: repo-relative files or folders the agent may not write.
    """

    root: Path
    approval: str = DEFAULT_APPROVAL
    max_steps: int = DEFAULT_MAX_STEPS
    max_format_errors: int = 3
    shell_allow: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    session_id: str | None = None
    max_consecutive_errors: int = 5  # tool failures in a row before the turn stops
    max_new_tokens: int = 2048  # per model call
    max_output_chars: int = 12000  # tool output kept for the model (head + tail)
    context_window: int | None = None  # None: the backend's
    tool_timeout: float | None = 300.0  # seconds, for tools that run commands
    keep_recent_tool_outputs: int = 3  # tool outputs never elided when the context is tight
    extra_instructions: str = ""  # appended to the system prompt (e.g. by `clover fix`)
    tool_names: tuple[str, ...] | None = None  # offer only these tools (None: all); small-context models
    save_session: bool = True
    meta: dict = field(default_factory=dict)  # free-form, written into the session header

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser().resolve()
        if not self.root.is_dir():
            raise ValueError(f"root {str(self.root)!r} is not a directory")
        if self.approval not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)}, got {self.approval!r}")
        if self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if self.max_format_errors < 1:
            raise ValueError("max_format_errors must be >= 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be >= 1")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.max_output_chars < 200:
            raise ValueError("max_output_chars must be >= 200")
        if self.context_window is not None and self.context_window < 256:
            raise ValueError("context_window must be >= 256")
        if self.session_id is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", self.session_id):
            raise ValueError(f"bad session id {self.session_id!r}: use letters, digits, '.', '_' and '-'")
        if self.tool_names is not None:
            self.tool_names = tuple(self.tool_names)
        self.shell_allow = tuple(p.strip() for p in self.shell_allow if p.strip())
        self.protected_paths = tuple(p.strip().strip("/") for p in self.protected_paths if p.strip())
