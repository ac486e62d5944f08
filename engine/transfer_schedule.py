"""LLaDA2's per-step transfer schedule (docs/engine.md, families table).

inclusionAI's LLaDA2.0 `generate` gives every block `steps` denoise steps (32 by default, capped
at the token budget: `steps = min(steps, gen_length // minimal_topk)`), and spreads the block over
them: step i must commit at least `block // steps` positions, one more for the first
`block % steps` steps. A step commits every masked position above the threshold when there are at
least that many, else the that-many most confident ones. With 32 steps on a 32-block every share
is 1, which is the plain rule (engine/selection.py); a budget under 32 makes the early shares
larger (budget 5: 7, 7, 6, 6, 6). Read from the reference to learn it; our own code.
"""
from __future__ import annotations

import torch


def transfer_schedule(block: int, steps: int | None, budget: int) -> list[int] | None:
    """The minimum commits of each step of a block, or None when every one is 1 (the plain rule).

    block: positions per block; steps: the family's reference steps per block (None: no
    schedule); budget: max_new_tokens. A share below 1 (a block smaller than the step count)
    counts as 1: every step makes progress."""
    if steps is None:
        return None
    steps = max(1, min(steps, budget))
    base, extra = divmod(block, steps)
    shares = [max(1, base + (1 if i < extra else 0)) for i in range(steps)]
    return shares if max(shares) > 1 else None


def at_least(commit: torch.Tensor, confidence: torch.Tensor, live: torch.Tensor, threshold: float,
             share: int) -> torch.Tensor:
    """commit [L] as the plain rule chose it, widened to the step's share: the positions of `live`
    above the threshold when there are at least `share` of them, else the `share` most confident
    live positions (all of them when fewer are live). confidence: [L], meaningful where live."""
    if share <= 1:
        return commit
    high = live & (confidence > threshold)
    if int(high.sum()) >= share:
        return high
    scores = torch.where(live, confidence.double(), torch.tensor(float("-inf"), dtype=torch.float64,
                                                                   device=confidence.device))
    k = min(share, int(live.sum()))
    out = torch.zeros_like(commit)
    out[scores.topk(k).indices] = True
    return out
