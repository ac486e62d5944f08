"""Block confidence and commit selection: the decoding rule of docs/engine.md as one op."""
from __future__ import annotations

import torch

from .._dispatch import use_triton
from .reference import commit_mask, select_commits_reference, token_confidence

__all__ = ["select_commits", "select_commits_reference", "commit_mask", "token_confidence"]


def select_commits(logits: torch.Tensor, masked: torch.Tensor, threshold: float,
                   temperature: float = 0.0, mask_token_id: int | None = None,
                   generator: torch.Generator | None = None,
                   top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Predict every block position and decide which masked positions commit this step.

    logits: [B, L, V] (L <= 32, any float dtype); masked: bool [B, L].
    Returns tokens: long [B, L] (argmax, or sampled when temperature > 0), confidence:
    float32 [B, L] (max softmax probability with the mask token's logit excluded; the sampled
    token's probability when sampling) and commit: bool [B, L] = masked & (confidence > threshold),
    or exactly the most confident masked position when none passes (nothing for a row with no
    masked position). Runs the Triton kernel for greedy decoding on CUDA, the reference otherwise.
    """
    if logits.dim() != 3 or masked.shape != logits.shape[:2]:
        raise ValueError(f"select_commits: logits [B, L, V] and masked [B, L] expected, got "
                         f"{tuple(logits.shape)} and {tuple(masked.shape)}")
    if temperature <= 0 and use_triton(logits):
        from .triton_kernel import select_commits_triton
        return select_commits_triton(logits, masked, threshold, mask_token_id)
    return select_commits_reference(logits, masked, threshold, temperature, mask_token_id,
                                    generator, top_p)
