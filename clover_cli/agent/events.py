"""The agent's event stream (docs/design.md, Boundaries and Agent).

Every front end (TUI, `clover run --json`, `clover fix`, `clover swebench`) consumes these
frozen dataclasses and nothing else.
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Union

Decision = Literal["yes", "no", "always"]


@dataclass(frozen=True)
class ApprovalAnswer:
    """The answer put into an ApprovalRequested future."""

    decision: Decision
    feedback: str = ""  # with "no": told to the model


@dataclass(frozen=True)
class TurnStarted:
    turn: int
    user_text: str


TextKind = Literal["answer", "thinking", "call", "unrun_call"]


@dataclass(frozen=True)
class BlockText:
    """A piece of a committed block of the assistant's text (or of a remote model's chunk),
    marked by the one markup rule (clover_cli/agent/markup.py). Front ends show it by `kind`:
    "answer" as text, "thinking" as thinking, "call" not at all (the call has its own events),
    "unrun_call" as written with markup.UNFINISHED_NOTICE (call text of a step that ran no call)."""

    text: str  # text delta
    block_index: int
    thinking: bool = False  # kind == "thinking" (a backend may pass this instead of kind)
    kind: TextKind = "answer"

    def __post_init__(self) -> None:
        if self.thinking and self.kind == "answer":
            object.__setattr__(self, "kind", "thinking")
        object.__setattr__(self, "thinking", self.kind == "thinking")


@dataclass(frozen=True)
class DenoiseProgress:
    """One denoise step of the block being decoded: placeholders fill in step by step."""

    block_index: int
    step: int
    pieces: tuple[str, ...]  # decoded text of each position ("" where masked)
    masked: tuple[bool, ...]


@dataclass(frozen=True)
class ToolCallProposed:
    call_id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ApprovalRequested:
    """The loop waits on `future` for an ApprovalAnswer."""

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    summary: str  # the diff or the command, as the user should see it
    always_key: str  # what "always" would remember (tool name or command prefix)
    future: Future = field(compare=False, repr=False)


@dataclass(frozen=True)
class ToolOutput:
    """A chunk of a running tool's output (e.g. shell stdout), for live display."""

    call_id: str
    name: str
    text: str


@dataclass(frozen=True)
class ToolFinished:
    call_id: str
    name: str
    ok: bool
    output: str  # the text the model sees
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Notice:
    """Something the user should know (compaction happened, approval remembered, ...)."""

    message: str


@dataclass(frozen=True)
class AgentError:
    message: str
    fatal: bool = False


@dataclass(frozen=True)
class TurnFinished:
    reason: Literal["done", "max_steps", "format_errors", "errors", "cancelled", "error", "truncated"]
    final_text: str
    stats: Mapping[str, Any] = field(default_factory=dict)  # tpf, tokens_per_second, tokens, ...


AgentEvent = Union[TurnStarted, BlockText, DenoiseProgress, ToolCallProposed, ApprovalRequested,
                   ToolOutput, ToolFinished, Notice, AgentError, TurnFinished]
