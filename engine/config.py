"""Per-request generation settings."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GenerationConfig:
    max_new_tokens: int = 256
    block_size: int | None = None  # None: the model's own block size
    threshold: float = 0.95  # commit masked positions with confidence strictly above this
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0  # 1.0: off
    progressive_ending: bool = False
    prefill_chunk_blocks: int | None = None  # prompt prefill chunk in blocks; None: ~1024 tokens
    token_healing: bool = False  # raw completions: back up the last prompt token (engine/healing.py)
    sub_block_size: int | None = None  # None: the family's own (Fast-dLLM v2: 8; others: the block)
    # speed-up that changes tokens (off by default; `clover bench` measures it against the exact
    # default): once an EOS is committed, never select positions after it
    eos_confine: bool = False

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.block_size is not None and not 1 <= self.block_size <= 1024:
            raise ValueError("block_size must be between 1 and 1024")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError("top_p must be in (0, 1]")
        if self.repetition_penalty < 1.0:
            raise ValueError("repetition_penalty must be >= 1.0")
        if self.sub_block_size is not None and not 1 <= self.sub_block_size <= 1024:
            raise ValueError("sub_block_size must be between 1 and 1024")
        if self.prefill_chunk_blocks is not None and self.prefill_chunk_blocks < 1:
            raise ValueError("prefill_chunk_blocks must be >= 1")
        self.stop = tuple(self.stop)
