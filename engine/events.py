"""Events the engine yields while it decodes (docs/engine.md)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DenoiseStep:
    """One denoise step of the block being decoded (for the live denoise view)."""

    block_index: int
    step: int
    token_ids: tuple[int, ...]  # the block's generated positions (prompt tail excluded)
    masked: tuple[bool, ...]  # True where the position is still masked
    committed_now: int  # how many positions this step committed
    edited: int = 0  # committed positions this step rewrote (LLaDA2.1 token editing)


@dataclass(frozen=True)
class BlockCommitted:
    """A finished block: its final tokens and the decoded text they add."""

    block_index: int
    token_ids: tuple[int, ...]
    text: str  # text delta; correct across multi-byte characters split between blocks


@dataclass(frozen=True)
class GenerationStats:
    generated_tokens: int
    forwards: int
    blocks: int
    steps_per_block: tuple[int, ...]
    forward_seconds: float
    total_seconds: float
    prompt_tokens: int = 0
    prefill_seconds: float = 0.0  # wall time of the prompt prefill (no token comes of it)
    reused_tokens: int = 0  # prompt positions whose cache came from an earlier request (prefix reuse)
    prefilled_tokens: int = 0  # prompt positions run through prefill forwards in this request
    first_block_seconds: float = 0.0  # from the request's start to its first committed block

    @property
    def tpf(self) -> float:
        """Tokens per model forward after prefill (unfused commit forwards count too)."""
        return self.generated_tokens / self.forwards if self.forwards else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.total_seconds if self.total_seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "generated_tokens": self.generated_tokens, "forwards": self.forwards,
            "blocks": self.blocks, "steps_per_block": list(self.steps_per_block),
            "tpf": round(self.tpf, 4), "forward_seconds": round(self.forward_seconds, 4),
            "total_seconds": round(self.total_seconds, 4),
            "tokens_per_second": round(self.tokens_per_second, 2),
            "prompt_tokens": self.prompt_tokens, "prefill_seconds": round(self.prefill_seconds, 4),
            "reused_tokens": self.reused_tokens, "prefilled_tokens": self.prefilled_tokens,
            "first_block_seconds": round(self.first_block_seconds, 4),
        }


@dataclass(frozen=True)
class GenerationResult:
    """The last event of a generation."""

    token_ids: tuple[int, ...]  # generated ids after the EOS / max / stop cut
    text: str
    finish_reason: str  # "eos" | "length" | "stop" | "cancelled" | "repetition"
    stats: GenerationStats
    prompt_ids: tuple[int, ...] = field(default=())
