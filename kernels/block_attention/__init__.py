"""Attention of a block's queries over the committed cache and, bidirectionally, the block."""
from __future__ import annotations

import torch

from .._dispatch import use_triton
from .reference import block_attention_reference

__all__ = ["block_attention", "block_attention_reference"]


def block_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    k_block: torch.Tensor, v_block: torch.Tensor,
                    scale: float | None = None, block_size: int | None = None) -> torch.Tensor:
    """Block queries attend to all P cached positions and to all L block positions.

    q: [B, Hq, L, D]; k_cache, v_cache: [B, Hkv, P, D] (P may be 0); k_block, v_block:
    [B, Hkv, L, D]; Hq a multiple of Hkv (grouped-query). scale defaults to D ** -0.5.
    Returns [B, Hq, L, D] in q's dtype. Flash-style Triton kernel on CUDA, torch otherwise.
    block_size (optional): the L positions are consecutive blocks of that size, bidirectional
    inside and causal between blocks — for prefilling several prompt blocks in one call.
    """
    B, Hq, L, D = q.shape
    if k_block.shape[0] != B or k_block.shape[2:] != (L, D) or v_block.shape != k_block.shape:
        raise ValueError(f"block_attention: block keys/values {tuple(k_block.shape)} / "
                         f"{tuple(v_block.shape)} do not fit queries {tuple(q.shape)}")
    Hkv = k_block.shape[1]
    if Hq % Hkv or k_cache.shape[:2] != (B, Hkv) or k_cache.shape[3] != D \
            or v_cache.shape != k_cache.shape:
        raise ValueError(f"block_attention: cache {tuple(k_cache.shape)} / {tuple(v_cache.shape)} "
                         f"does not fit queries {tuple(q.shape)} and block {tuple(k_block.shape)}")
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_attention: block_size must be >= 1, got {block_size}")
    if use_triton(q):
        from .triton_kernel import block_attention_triton
        return block_attention_triton(q, k_cache, v_cache, k_block, v_block, scale, block_size)
    return block_attention_reference(q, k_cache, v_cache, k_block, v_block, scale, block_size)
