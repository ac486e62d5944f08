"""Per-turn statistics carried by TurnFinished and the `turn_end` JSON line (docs/agent.md).

Besides the turn's totals, `model_calls` lists each model call: its prompt and generated tokens
and, from backends that report them (the in-process engine), how much of the prompt was reused
from the engine's cache of earlier prompts (`reused_tokens`), how much was prefilled
(`prefilled_tokens`) and the time to the first committed block (`first_block_seconds`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

PREFIX_KEYS = ("reused_tokens", "prefilled_tokens", "first_block_seconds")


@dataclass
class TurnStats:
    steps: int = 0
    tool_calls: int = 0
    format_errors: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    forwards: int = 0
    decode_steps: int = 0
    model_seconds: float = 0.0
    context_tokens: int = 0  # prompt size at the last model call
    context_window: int = 0
    reused_tokens: int = 0
    prefilled_tokens: int = 0
    first_block_seconds: float = 0.0
    model_calls: list[dict] = field(default_factory=list)
    placement: dict = field(default_factory=dict)  # in-process models: device, dtype, weight_format
    scripted: bool = False  # a replay model: its text is read, not generated, so it has no speed
    started: float = field(default_factory=time.perf_counter)

    def add_model(self, s: dict) -> None:
        """Adds one model call's stats (engine GenerationStats.as_dict() or a backend's own)."""
        self.generated_tokens += int(s.get("generated_tokens", 0) or 0)
        self.prompt_tokens += int(s.get("prompt_tokens", 0) or 0)
        self.forwards += int(s.get("forwards", 0) or 0)
        self.decode_steps += int(sum(s.get("steps_per_block", []) or []) or s.get("forwards", 0) or 0)
        self.model_seconds += float(s.get("total_seconds", 0.0) or 0.0)
        call = {"prompt_tokens": int(s.get("prompt_tokens", 0) or 0),
                "generated_tokens": int(s.get("generated_tokens", 0) or 0)}
        for key in PREFIX_KEYS:
            if key in s:  # only what the backend reports: absent means "not known", not 0
                call[key] = round(float(s[key] or 0), 4) if key.endswith("_seconds") else int(s[key] or 0)
        self.reused_tokens += call.get("reused_tokens", 0)
        self.prefilled_tokens += call.get("prefilled_tokens", 0)
        self.first_block_seconds += call.get("first_block_seconds", 0.0)
        self.model_calls.append(call)

    def as_dict(self) -> dict:
        seconds = time.perf_counter() - self.started
        return {
            "steps": self.steps, "tool_calls": self.tool_calls, "format_errors": self.format_errors,
            "generated_tokens": self.generated_tokens, "prompt_tokens": self.prompt_tokens,
            "forwards": self.forwards,
            "tpf": round(self.generated_tokens / self.decode_steps, 4) if self.decode_steps else 0.0,
            "tokens_per_second": None if self.scripted else
            round(self.generated_tokens / self.model_seconds, 2) if self.model_seconds else 0.0,
            "model_seconds": round(self.model_seconds, 4), "seconds": round(seconds, 4),
            "context_tokens": self.context_tokens, "context_window": self.context_window,
            "reused_tokens": self.reused_tokens, "prefilled_tokens": self.prefilled_tokens,
            "first_block_seconds": round(self.first_block_seconds, 4),
            "model_calls": [dict(c) for c in self.model_calls],
            **dict(self.placement),
        }
