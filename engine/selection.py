"""The commit rule of one denoise step (DESIGN.md section 3).

Uses the fused kernel from `clover_cli.kernels.confidence` when it is available (Triton on CUDA,
its torch reference on CPU); `select_reference` below is the rule written out plainly.
"""
from __future__ import annotations

import torch


def select_reference(logits: torch.Tensor, masked: torch.Tensor, threshold: float,
                     temperature: float = 0.0, mask_token_id: int | None = None,
                     generator: torch.Generator | None = None, top_p: float = 1.0):
    """logits: [L, V]; masked: bool [L] -> (tokens [L], confidence [L], commit bool [L]).

    Confidence is the max softmax probability (the sampled token's probability when sampling);
    commit = masked & (confidence > threshold), else the single most confident masked position.
    """
    logits = logits.float()
    if mask_token_id is not None:
        logits = logits.clone()
        logits[:, mask_token_id] = float("-inf")  # the mask token is never a prediction
    if temperature > 0:
        probs = torch.softmax(logits / temperature, dim=-1)  # [L, V]
        if top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < top_p  # always keeps the top token
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
            probs = probs / probs.sum(-1, keepdim=True)
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # [L]
        confidence = probs.gather(-1, tokens[:, None]).squeeze(-1)
    else:
        probs = torch.softmax(logits, dim=-1)
        confidence, tokens = probs.max(dim=-1)
    commit = masked & (confidence > threshold)
    if masked.any() and not commit.any():
        best = torch.where(masked, confidence, torch.full_like(confidence, -1.0)).argmax()
        commit = torch.zeros_like(masked)
        commit[best] = True
    return tokens, confidence, commit


def select(logits: torch.Tensor, masked: torch.Tensor, threshold: float, temperature: float = 0.0,
           mask_token_id: int | None = None, generator: torch.Generator | None = None,
           top_p: float = 1.0):
    """Dispatch to the kernels package (batched [1, L, V]) when present, else the reference."""
    try:
        from clover_cli.kernels.confidence import select_commits
    except ImportError:
        return select_reference(logits, masked, threshold, temperature, mask_token_id, generator, top_p)
    tokens, confidence, commit = select_commits(
        logits[None], masked[None], threshold, temperature=temperature,
        mask_token_id=mask_token_id, generator=generator, top_p=top_p)
    return tokens[0], confidence[0], commit[0]
