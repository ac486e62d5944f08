"""Per-request generation settings."""
from __future__ import annotations

from dataclasses import dataclass

# The block-diffusion commit threshold (docs/design.md, "Engine"): every default in Clover refers
# to this one, and every check of a threshold is `check_threshold`'s (0, 1].
DEFAULT_THRESHOLD = 0.95
REMASKINGS = ("low_confidence", "random")  # LLaDA 1.x exact mode's remasking strategies


def check_threshold(value: object) -> float:
    """`value` as a float if it is a number in (0, 1]; else ValueError with a one-line reason."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"threshold must be a number, got {value!r}")
    if not 0.0 < float(value) <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {value}")
    return float(value)


@dataclass
class GenerationConfig:
    max_new_tokens: int = 256
    block_size: int | None = None  # None: the model's own block size
    threshold: float = DEFAULT_THRESHOLD  # commit masked positions with confidence strictly above this
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
    # LLaDA2.1 token editing (engine/edit_decode.py): None = the checkpoint's own (on for a
    # LLaDA2.1 release, off otherwise); the threshold and post-fill steps are its generate's defaults
    editing: bool | None = None
    editing_threshold: float = 0.9
    max_post_steps: int = 16
    # full-attention diffusion (Dream, LLaDA 1.x; engine/fullattn_decode.py): "exact" (their own
    # generate), "prefix" / "dual" (Fast-dLLM v1 caches, approximate); None: the default (dual)
    diffusion_mode: str | None = None
    diffusion_steps: int | None = None  # exact mode's steps (None: generation_config / the length)
    diffusion_alg: str | None = None  # Dream's alg (None: generation_config.json's, else origin)
    # LLaDA 1.x exact mode's own generate options (engine/fullattn_decode.py): which masked
    # positions a step commits ("low_confidence": the most confident; "random": a seeded uniform
    # draw) and classifier-free guidance's scale (0: off); refused elsewhere unless at these defaults
    remasking: str = "low_confidence"
    cfg_scale: float = 0.0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.block_size is not None and not 1 <= self.block_size <= 1024:
            raise ValueError("block_size must be between 1 and 1024")
        self.threshold = check_threshold(self.threshold)
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
        if not 0.0 <= self.editing_threshold <= 1.0:
            raise ValueError(f"editing_threshold must be in [0, 1], got {self.editing_threshold}")
        if self.max_post_steps < 0:
            raise ValueError("max_post_steps must be >= 0")
        if self.diffusion_mode is not None and self.diffusion_mode not in ("exact", "prefix", "dual"):
            raise ValueError(f"diffusion_mode must be exact, prefix or dual, got {self.diffusion_mode!r}")
        if self.diffusion_steps is not None and self.diffusion_steps < 1:
            raise ValueError("diffusion_steps must be >= 1")
        if self.remasking not in REMASKINGS:
            raise ValueError(f"remasking must be low_confidence or random, got {self.remasking!r}")
        if isinstance(self.cfg_scale, bool) or not isinstance(self.cfg_scale, (int, float)) or self.cfg_scale < 0:
            raise ValueError(f"cfg_scale must be a number >= 0, got {self.cfg_scale!r}")
        self.cfg_scale = float(self.cfg_scale)
        self.stop = tuple(self.stop)
