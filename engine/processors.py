"""Logit processing before selection, repetition control and progressive ending (docs/engine.md).

Both are off unless the GenerationConfig asks for them (`clover generate` shows the plain rule).
"""
from __future__ import annotations

import torch

from .config import GenerationConfig

REPETITION_WINDOW = 128  # recent generated tokens the penalty looks at
PROGRESSIVE_START = 0.75  # share of the token budget after which EOS is favoured
PROGRESSIVE_MAX_BIAS = 8.0  # logit bias on EOS when the budget is spent


def apply_repetition_penalty(logits: torch.Tensor, recent: list[int], penalty: float) -> torch.Tensor:
    """CTRL-style penalty (Keskar et al. 2019) on tokens seen recently. logits: [L, V]."""
    if penalty <= 1.0 or not recent:
        return logits
    ids = torch.tensor(sorted(set(recent[-REPETITION_WINDOW:])), device=logits.device)
    picked = logits[:, ids]  # [L, K]
    logits = logits.clone()
    logits[:, ids] = torch.where(picked > 0, picked / penalty, picked * penalty)
    return logits


def progressive_eos_bias(generated: int, budget: int) -> float:
    """How much to add to EOS logits when `generated` of `budget` tokens are used."""
    used = generated / max(budget, 1)
    if used <= PROGRESSIVE_START:
        return 0.0
    return PROGRESSIVE_MAX_BIAS * min(1.0, (used - PROGRESSIVE_START) / (1.0 - PROGRESSIVE_START))


def process_logits(logits: torch.Tensor, cfg: GenerationConfig, *, recent: list[int],
                   generated: int, eos_ids: tuple[int, ...], progressive: bool = False) -> torch.Tensor:
    """Apply the enabled processors to logits [L, V] (float32) and return new logits.
    progressive: bias toward EOS near the budget (block diffusion's `progressive_ending`)."""
    logits = apply_repetition_penalty(logits, recent, cfg.repetition_penalty)
    if progressive and eos_ids:
        bias = progressive_eos_bias(generated, cfg.max_new_tokens)
        if bias:
            logits = logits.clone()
            logits[:, list(eos_ids)] += bias
    return logits


REPEAT_SPAN = 48  # a periodic tail this long (and of >= REPEAT_TIMES periods) is a loop
REPEAT_TIMES = 3
REPEAT_MAX_PERIOD = 32  # the longest repeated n-gram looked for


def repeated_block(blocks: list[tuple[int, ...]], eos_ids: tuple[int, ...]) -> bool:
    """True when the last two committed blocks are identical and not just EOS/padding."""
    if len(blocks) < 2 or blocks[-1] != blocks[-2] or len(blocks[-1]) < 4:
        return False
    return any(t not in eos_ids for t in blocks[-1])


def repeating_tail(ids: list[int], eos_ids: tuple[int, ...]) -> int:
    """The period p (an n-gram of p tokens) that the generated ids end by repeating, or 0: the
    last max(REPEAT_SPAN, REPEAT_TIMES * p) ids equal the ids p before them, for some p up to
    REPEAT_MAX_PERIOD. Blind to block edges ("of the file of the file ..." in blocks of 32
    repeats with period 3, and no two blocks are alike)."""
    for p in range(1, REPEAT_MAX_PERIOD + 1):
        span = max(REPEAT_SPAN, REPEAT_TIMES * p)
        if len(ids) < span + p:
            break
        tail = ids[-span:]
        if tail == ids[-span - p:-p] and any(t not in eos_ids for t in tail[-p:]):
            return p
    return 0


def repetition_ending(ids: list[int], units: list[tuple[int, ...]], eos_ids: tuple[int, ...]) -> bool:
    """Repetition control's stop: two identical blocks in a row, or a repeated n-gram at the end
    of the output, whichever block edges it crosses."""
    return repeated_block(units, eos_ids) or repeating_tail(ids, eos_ids) > 0
