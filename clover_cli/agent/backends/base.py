"""The one interface every model backend implements (docs/engine.md, model specs)."""
from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterator, Union

from clover_cli.agent.events import BlockText, DenoiseProgress
# the backends split their streams by the one markup rule under these names
from clover_cli.engine.config import DEFAULT_THRESHOLD, check_threshold


class BackendError(RuntimeError):
    """A model backend failure; str() is one line for the user, never holding the API key."""

    def __str__(self) -> str:
        from clover_cli.agent.redact import scrub  # a server may quote the key it was sent
        return scrub(super().__str__())


@dataclass(frozen=True)
class NativeToolCall:
    """A tool call the server returned as structured data (OpenAI `tool_calls`)."""

    id: str
    name: str
    arguments: str  # the JSON text as streamed; parsed by the agent


@dataclass(frozen=True)
class Completion:
    """The last item of every backend stream."""

    text: str  # raw assistant text (tool-call markup included when the model wrote it as text)
    finish_reason: str = "stop"  # "stop" | "eos" | "length" | "cancelled" | "repetition" | "tool_calls"
    tool_calls: tuple[NativeToolCall, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)


StreamItem = Union[BlockText, DenoiseProgress, Completion]


class ModelBackend(ABC):
    """Turns a conversation (OpenAI-style message dicts) into a streamed completion.

    Messages: {"role": "system"|"user"|"assistant"|"tool", "content": str}; assistant messages may
    carry "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": dict}}];
    tool messages carry "tool_call_id" and "name".
    """

    name: str = "model"
    is_diffusion: bool = False
    block_size: int = 1
    context_window: int = 32768
    native_tools: bool = False  # True when tool calls may come back as NativeToolCall

    def __init__(self, threshold: float | None = DEFAULT_THRESHOLD) -> None:
        try:  # the engine's one check: (0, 1]
            self.threshold = check_threshold(DEFAULT_THRESHOLD if threshold is None else threshold)
        except ValueError as e:
            raise BackendError(str(e)) from None

    @property
    def info(self) -> dict[str, Any]:
        """What front ends show about the model."""
        return {"name": self.name, "is_diffusion": self.is_diffusion, "block_size": self.block_size,
                "threshold": self.threshold, "context_window": self.context_window}

    @abstractmethod
    def stream(self, messages: list[dict], tools: list[dict], *, max_new_tokens: int = 2048,
               cancel: threading.Event | None = None) -> Iterator[StreamItem]:
        """Yields BlockText / DenoiseProgress items, then exactly one Completion (also on cancel)."""

    def count_tokens(self, messages: list[dict], tools: list[dict]) -> int:
        """Prompt size in tokens; the default estimates 4 characters per token."""
        chars = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls", ""))) + 8
                    for m in messages)
        return chars // 4 + len(json.dumps(tools)) // 4

    def reset_cache(self) -> None:
        """Forget what was kept from earlier prompts of this conversation (the in-process engine's
        prompt cache); called when a new conversation starts on the same backend. Remote and
        replay backends keep nothing."""

    def close(self) -> None:
        """Releases resources (connections, model memory)."""
