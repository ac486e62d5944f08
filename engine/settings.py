"""Each family's own generation settings (docs/design.md, "The family table").

`GenerationConfig` (engine/config.py) holds what every request has: the budget, the sampler, the
seed, the stop strings. What only some families' decodes take lives here, one frozen dataclass per
kind of decode, and each row of the family table names its class (`FamilyRow.settings`):

| class            | families                               | fields                                   |
|------------------|----------------------------------------|------------------------------------------|
| `Settings`       | DiffusionGemma                         | none                                     |
| `ARSettings`     | AR                                     | progressive ending                       |
| `BlockSettings`  | Clover, SDAR, Fast-dLLM v2, GDN hybrid | ARSettings' + sub-blocks, prefill chunk, EOS confinement |
| `EditSettings`   | LLaDA2                                 | BlockSettings' + token editing           |
| `ModeSettings`   | Dream                                  | diffusion mode, steps, Dream's alg       |
| `LladaSettings`  | LLaDA 1.x                              | ModeSettings' + remasking, cfg_scale     |

A caller that knows the family builds its class; one that does not (a script passing the same
flags to every model) builds any class, and `for_family` carries over the fields the family takes
and refuses, in one line, a field it does not take set to anything but the state the family already
has (`asks_nothing`). A decoder reads only its own class (`settings_of`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

MODES = ("exact", "prefix", "dual")  # full-attention diffusion's modes (engine/fullattn_parts.py)
REMASKINGS = ("low_confidence", "random")  # LLaDA 1.x exact mode's remasking strategies


class SettingsError(ValueError):
    """Settings a family does not take, or out of range; the message is one line."""


@dataclass(frozen=True)
class Settings:
    """A decode that takes no settings of its own beyond GenerationConfig's."""

    @classmethod
    def names(cls) -> frozenset[str]:
        """The fields of this class (the options a family with it takes beyond the common ones)."""
        return frozenset(f.name for f in fields(cls))

    def changed(self) -> dict[str, Any]:
        """The fields set to anything but their default, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != f.default}


@dataclass(frozen=True)
class ARSettings(Settings):
    """Autoregressive decoding's (engine/ar_decode.py): what its logits processors take."""

    progressive_ending: bool = False  # bias toward EOS near the budget (engine/processors.py)


@dataclass(frozen=True)
class BlockSettings(ARSettings):
    """Block diffusion's own settings (engine/block_decode.py): AR's (a block of one) and more."""

    sub_block_size: int | None = None  # None: the family's own (Fast-dLLM v2: 8; others: the block)
    prefill_chunk_blocks: int | None = None  # prompt prefill chunk in blocks; None: ~1024 tokens
    # speed-up that changes tokens (off by default; `clover bench` measures it against the exact
    # default): once an EOS is committed, never select positions after it
    eos_confine: bool = False

    def __post_init__(self) -> None:
        if self.sub_block_size is not None and not 1 <= self.sub_block_size <= 1024:
            raise SettingsError("sub_block_size must be between 1 and 1024")
        if self.prefill_chunk_blocks is not None and self.prefill_chunk_blocks < 1:
            raise SettingsError("prefill_chunk_blocks must be >= 1")


@dataclass(frozen=True)
class EditSettings(BlockSettings):
    """LLaDA2's: block diffusion's, plus LLaDA2.1's token editing (engine/edit_decode.py)."""

    editing: bool | None = None  # None: the checkpoint's own (on for a LLaDA2.1 release)
    editing_threshold: float = 0.9  # the reference generate's defaults
    max_post_steps: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.editing_threshold <= 1.0:
            raise SettingsError(f"editing_threshold must be in [0, 1], got {self.editing_threshold}")
        if self.max_post_steps < 0:
            raise SettingsError("max_post_steps must be >= 0")


@dataclass(frozen=True)
class ModeSettings(Settings):
    """Full-attention diffusion's (Dream; engine/fullattn_decode.py)."""

    # "exact" (their own generate), "prefix" / "dual" (Fast-dLLM v1 caches, approximate);
    # None: the default (fullattn_parts.DEFAULT_MODE)
    diffusion_mode: str | None = None
    diffusion_steps: int | None = None  # exact mode's steps (None: generation_config / the length)
    diffusion_alg: str | None = None  # Dream's alg (None: generation_config.json's, else origin)

    def __post_init__(self) -> None:
        if self.diffusion_mode is not None and self.diffusion_mode not in MODES:
            raise SettingsError(f"unknown diffusion mode {self.diffusion_mode!r} (choose from {', '.join(MODES)})")
        if self.diffusion_steps is not None and self.diffusion_steps < 1:
            raise SettingsError("diffusion_steps must be >= 1")


@dataclass(frozen=True)
class LladaSettings(ModeSettings):
    """LLaDA 1.x's: the modes', plus its exact generate's own options: which masked positions a
    step commits ("low_confidence": the most confident; "random": a seeded uniform draw) and
    classifier-free guidance's scale (0: off)."""

    remasking: str = "low_confidence"
    cfg_scale: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.remasking not in REMASKINGS:
            raise SettingsError(f"remasking must be low_confidence or random, got {self.remasking!r}")
        if isinstance(self.cfg_scale, bool) or not isinstance(self.cfg_scale, (int, float)) or self.cfg_scale < 0:
            raise SettingsError(f"cfg_scale must be a number >= 0, got {self.cfg_scale!r}")
        object.__setattr__(self, "cfg_scale", float(self.cfg_scale))


SETTINGS = (Settings, ARSettings, BlockSettings, EditSettings, ModeSettings, LladaSettings)
ALL_NAMES = frozenset().union(*(cls.names() for cls in SETTINGS))


def asks_nothing(option: str, value: Any, block: int) -> bool:
    """Whether `value` asks a family that does not take `option` for nothing it lacks: the
    option's off state (no healing, penalty 1, top-p 1, no post-fill steps, no mode, low-confidence
    remasking, guidance scale 0), its own block, or sub-blocks as large as that block (at a block
    of one, EOS confinement too). A threshold, a temperature, editing's threshold and diffusion
    steps have no such value."""
    if option in ("token_healing", "progressive_ending", "editing"):
        return value is False or value is None
    if option == "eos_confine":
        return value is False or value is None or block == 1
    if option in ("top_p", "repetition_penalty"):
        return value == 1.0
    if option in ("max_post_steps", "cfg_scale"):
        return value == 0
    if option in ("diffusion_mode", "diffusion_alg", "prefill_chunk_blocks", "diffusion_steps"):
        return value is None
    if option == "remasking":
        return value == "low_confidence"
    if option == "block_size":
        return value == block
    if option == "sub_block_size":
        return value is None or value >= block
    return False


def for_family(cls: type[Settings], given: Settings | None, *, block: int, family: str,
               takers: Callable[[str], str] = lambda name: "other") -> Settings:
    """`given` as the family's settings class `cls`: its fields that `cls` has are carried over,
    the rest must ask nothing of the family (`asks_nothing` at its `block`); None: the defaults.
    SettingsError otherwise: one line naming the fields, the families that take them
    (`takers(name)`) and this one (`family`)."""
    if given is None:
        return cls()
    if type(given) is cls:
        return given
    taken = cls.names()
    carried = {name: value for name, value in given.changed().items() if name in taken}
    refused = [name for name, value in given.changed().items()
               if name not in taken and not asks_nothing(name, value, block)]
    if refused:
        raise SettingsError("; ".join(f"{name} applies to {takers(name)} checkpoints only" for name in refused)
                            + f"; this model is {family} (docs/design.md, \"The family table\")")
    return cls(**carried)


def from_options(cls: type[Settings], options: dict[str, Any]) -> Settings:
    """The settings of class `cls` from flat options (name -> value, e.g. a command's flags),
    taking the names `cls` has and leaving the rest (the caller checks those: `asks_nothing`)."""
    return cls(**{name: value for name, value in options.items() if name in cls.names()})

