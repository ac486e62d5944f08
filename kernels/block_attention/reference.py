"""Plain-torch block attention: block queries see the cached prefix and the whole block."""
from __future__ import annotations

import torch


def block_causal_mask(L: int, block_size: int | None, device=None) -> torch.Tensor:
    """bool [L, L]: query i may see block position j (same or earlier block of block_size)."""
    idx = torch.arange(L, device=device)
    if block_size is None:
        return torch.ones(L, L, dtype=torch.bool, device=device)
    return (idx[None, :] // block_size) <= (idx[:, None] // block_size)


def block_attention_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              k_block: torch.Tensor, v_block: torch.Tensor,
                              scale: float | None = None,
                              block_size: int | None = None) -> torch.Tensor:
    """Softmax attention of the block over [cache ; block] keys, computed in float32.

    q: [B, Hq, L, D]; k_cache, v_cache: [B, Hkv, P, D] (P may be 0); k_block, v_block:
    [B, Hkv, L, D]; Hq a multiple of Hkv (query head h reads key/value head h // (Hq // Hkv)).
    Returns [B, Hq, L, D] in q's dtype. Causal to the past holds because the cache only holds
    the committed prefix; the block is bidirectional, or, with block_size, split into
    consecutive blocks that are bidirectional inside and causal between (multi-block prefill).
    """
    B, Hq, L, D = q.shape
    Hkv = k_block.shape[1]
    if Hq % Hkv:
        raise ValueError(f"block_attention: Hq={Hq} is not a multiple of Hkv={Hkv}")
    scale = D ** -0.5 if scale is None else scale
    k = torch.cat([k_cache, k_block], dim=2).float()  # [B, Hkv, P+L, D]
    v = torch.cat([v_cache, v_block], dim=2).float()
    group = Hq // Hkv
    k = k.repeat_interleave(group, dim=1)  # [B, Hq, P+L, D]
    v = v.repeat_interleave(group, dim=1)
    scores = (q.float() @ k.transpose(-1, -2)) * scale  # [B, Hq, L, P+L]
    if block_size is not None:
        P = k_cache.shape[2]
        allowed = torch.ones(L, P + L, dtype=torch.bool, device=q.device)
        allowed[:, P:] = block_causal_mask(L, block_size, q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).to(q.dtype)
