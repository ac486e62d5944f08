"""The gated delta rule of Gated DeltaNet layers (Qwen3-Next / Qwen3.5 conventions)."""
from __future__ import annotations

import torch

from .._dispatch import use_triton
from .reference import (check_shapes, chunk_gated_delta_rule_reference,
                        recurrent_gated_delta_rule)

__all__ = ["chunk_gated_delta_rule", "chunk_gated_delta_rule_reference",
           "recurrent_gated_delta_rule"]


def chunk_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                           beta: torch.Tensor, initial_state: torch.Tensor | None = None,
                           output_final_state: bool = False, chunk_size: int = 16,
                           scale: float | None = None, use_qk_l2norm: bool = False,
                           use_qk_l2norm_in_kernel: bool | None = None, cu_seqlens=None):
    """Gated delta rule over T steps from an initial state, chunked along time.

    q, k: [B, T, Hk, Dk]; v: [B, T, Hv, Dv] (Hv a multiple of Hk, usually equal); g (log decay,
    <= 0) and beta: [B, T, Hv]; initial_state: [B, Hv, Dk, Dv] or None (zeros); chunk_size must
    divide 32; scale defaults to Dk ** -0.5 (applied to q after the optional L2 norm).
    Returns (o: [B, T, Hv, Dv] in q's dtype, final state float32 [B, Hv, Dk, Dv] or None).
    The input state is never modified, so a denoise step can read the committed state and
    only a commit (output_final_state=True) produces the next one. use_qk_l2norm_in_kernel and
    cu_seqlens (must be None) accept transformers' keyword names for drop-in use.
    """
    if use_qk_l2norm_in_kernel is not None:
        use_qk_l2norm = use_qk_l2norm_in_kernel
    if cu_seqlens is not None:
        raise ValueError("chunk_gated_delta_rule: variable-length batches (cu_seqlens) are "
                         "not supported")
    if chunk_size < 1 or 32 % chunk_size:
        raise ValueError(f"chunk_gated_delta_rule: chunk_size {chunk_size} does not divide 32")
    if use_triton(q, v):
        check_shapes(q, k, v, g, beta, initial_state)
        from .triton_kernel import chunk_gated_delta_rule_triton
        return chunk_gated_delta_rule_triton(q, k, v, g, beta, initial_state, output_final_state,
                                             chunk_size, scale, use_qk_l2norm)
    return chunk_gated_delta_rule_reference(q, k, v, g, beta, initial_state, output_final_state,
                                            chunk_size, scale, use_qk_l2norm)
