"""Per-request generation settings."""
from __future__ import annotations

from dataclasses import dataclass

from .settings import Settings

# The block-diffusion commit threshold (docs/design.md, "Engine"): every default in Clover refers
# to this one, and every check of a threshold is `check_threshold`'s (0, 1].
DEFAULT_THRESHOLD = 0.95


def check_threshold(value: object) -> float:
    """`value` as a float if it is a number in (0, 1]; else ValueError with a one-line reason."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"threshold must be a number, got {value!r}")
    if not 0.0 < float(value) <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {value}")
    return float(value)


@dataclass
class GenerationConfig:
    """What every request has, whatever the family: the budget, the sampler, the seed, the stop
    strings. What only some families take is `family`, that family's own settings class
    (engine/settings.py; the family table's `settings`, engine/families.py)."""

    max_new_tokens: int = 256
    block_size: int | None = None  # None: the model's own block size
    threshold: float = DEFAULT_THRESHOLD  # commit masked positions with confidence strictly above this
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0  # 1.0: off
    token_healing: bool = False  # raw completions: back up the last prompt token (engine/healing.py)
    family: Settings | None = None  # the family's own settings; None: its defaults

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
        if self.family is not None and not isinstance(self.family, Settings):
            raise ValueError(f"family must be a family's settings (engine/settings.py), got {self.family!r}")
        self.stop = tuple(self.stop)
