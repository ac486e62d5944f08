"""Plain-torch block confidence and commit selection (docs/engine.md, decoding rule)."""
from __future__ import annotations

import torch


def token_confidence(logits: torch.Tensor, temperature: float = 0.0,
                     mask_token_id: int | None = None,
                     generator: torch.Generator | None = None,
                     top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-position prediction and its confidence.

    logits: [B, L, V]. Returns tokens: long [B, L] and confidence: float32 [B, L].
    Greedy (temperature <= 0): argmax and the max softmax probability. Sampling: the token drawn
    from softmax(logits / temperature) restricted to the top-p nucleus, and its probability there.
    The mask token's logit is excluded before the softmax.
    """
    x = logits.float()  # [B, L, V]
    if mask_token_id is not None:
        x = x.clone()
        x[..., mask_token_id] = float("-inf")
    if temperature <= 0:
        probs = torch.softmax(x, dim=-1)  # [B, L, V]
        conf, tokens = probs.max(dim=-1)
        return tokens, conf
    probs = torch.softmax(x / temperature, dim=-1)  # [B, L, V]
    if top_p < 1.0:
        probs = _top_p_filter(probs, top_p)
    flat = probs.reshape(-1, probs.shape[-1])  # [B*L, V]
    tokens = torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])  # [B, L]
    conf = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, conf


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p; renormalise."""
    sorted_p, order = probs.sort(dim=-1, descending=True)  # [B, L, V]
    before = sorted_p.cumsum(dim=-1) - sorted_p  # mass strictly before each token
    sorted_p = torch.where(before < top_p, sorted_p, torch.zeros_like(sorted_p))
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return kept / kept.sum(dim=-1, keepdim=True)


def commit_mask(confidence: torch.Tensor, masked: torch.Tensor, threshold: float) -> torch.Tensor:
    """Which masked positions commit: conf > threshold (strict), else the single most confident.

    confidence: float32 [B, L]; masked: bool [B, L]. Returns bool [B, L]. A row with no masked
    position commits nothing; ties in the fallback go to the first position.
    """
    commit = masked & (confidence > threshold)  # [B, L]
    scores = torch.where(masked, confidence, torch.full_like(confidence, -1.0))
    best = scores.argmax(dim=-1)  # [B]
    need = masked.any(dim=-1) & ~commit.any(dim=-1)  # [B]
    fallback = torch.zeros_like(commit)
    fallback[torch.arange(commit.shape[0], device=commit.device), best] = True
    return commit | (fallback & need.unsqueeze(-1))


def select_commits_reference(logits: torch.Tensor, masked: torch.Tensor, threshold: float,
                             temperature: float = 0.0, mask_token_id: int | None = None,
                             generator: torch.Generator | None = None,
                             top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reference of :func:`clover_cli.kernels.confidence.select_commits` (same contract)."""
    tokens, conf = token_confidence(logits, temperature, mask_token_id, generator, top_p)
    return tokens, conf, commit_mask(conf, masked.bool(), threshold)
