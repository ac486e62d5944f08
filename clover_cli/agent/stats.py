"""Per-turn statistics carried by TurnFinished and the `turn_end` JSON line."""
from __future__ import annotations

import time
from dataclasses import dataclass, field


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
    started: float = field(default_factory=time.perf_counter)

    def add_model(self, s: dict) -> None:
        """Adds one model call's stats (engine GenerationStats.as_dict() or a backend's own)."""
        self.generated_tokens += int(s.get("generated_tokens", 0) or 0)
        self.prompt_tokens += int(s.get("prompt_tokens", 0) or 0)
        self.forwards += int(s.get("forwards", 0) or 0)
        self.decode_steps += int(sum(s.get("steps_per_block", []) or []) or s.get("forwards", 0) or 0)
        self.model_seconds += float(s.get("total_seconds", 0.0) or 0.0)

    def as_dict(self) -> dict:
        seconds = time.perf_counter() - self.started
        return {
            "steps": self.steps, "tool_calls": self.tool_calls, "format_errors": self.format_errors,
            "generated_tokens": self.generated_tokens, "prompt_tokens": self.prompt_tokens,
            "forwards": self.forwards,
            "tpf": round(self.generated_tokens / self.decode_steps, 4) if self.decode_steps else 0.0,
            "tokens_per_second": round(self.generated_tokens / self.model_seconds, 2) if self.model_seconds else 0.0,
            "model_seconds": round(self.model_seconds, 4), "seconds": round(seconds, 4),
            "context_tokens": self.context_tokens, "context_window": self.context_window,
        }
