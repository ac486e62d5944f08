"""Flash-style block attention in Triton.

One program per (batch, query head, tile of block rows) streams the cached keys/values and then
the block's own keys/values in tiles, with the online softmax of FlashAttention (Dao et al.
2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness"); the
L x (P + L) score matrix is never materialised. Grouped-query heads index the shared key/value
head directly instead of repeating it.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._dispatch import next_pow2


@triton.jit
def _attend_tile(acc, m_i, l_i, q, k_ptrs, v_ptrs, n_ok, qk_scale, DOT_PREC: tl.constexpr):
    """Fold one tile of keys/values into the running (acc, max, sum) of the online softmax."""
    k = tl.load(k_ptrs, mask=n_ok[:, None], other=0.0)  # [BLOCK_N, BLOCK_D]
    v = tl.load(v_ptrs, mask=n_ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # [BLOCK_M, BLOCK_N]
    s = tl.where(n_ok[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
    return acc, m_new, l_i


@triton.jit
def _block_attention_kernel(q_ptr, kc_ptr, vc_ptr, kb_ptr, vb_ptr, o_ptr, Hq, L, P, D, group,
                            qk_scale,
                            sq_b, sq_h, sq_l, skc_b, skc_h, skc_p, svc_b, svc_h, svc_p,
                            skb_b, skb_h, skb_l, svb_b, svb_h, svb_l, so_b, so_h, so_l,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                            DOT_PREC: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // Hq
    h = bh % Hq
    hk = h // group
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    cols = tl.arange(0, BLOCK_N)
    d_ok = dims < D
    q_ptrs = q_ptr + b * sq_b + h * sq_h + rows[:, None] * sq_l + dims[None, :]
    q = tl.load(q_ptrs, mask=(rows[:, None] < L) & d_ok[None, :], other=0.0)  # [BLOCK_M, BLOCK_D]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    kc_base = kc_ptr + b * skc_b + hk * skc_h
    vc_base = vc_ptr + b * svc_b + hk * svc_h
    for n0 in range(0, P, BLOCK_N):
        n = n0 + cols
        n_ok = n < P
        acc, m_i, l_i = _attend_tile(acc, m_i, l_i, q,
                                     kc_base + n[:, None] * skc_p + dims[None, :],
                                     vc_base + n[:, None] * svc_p + dims[None, :],
                                     n_ok, qk_scale, DOT_PREC)
    kb_base = kb_ptr + b * skb_b + hk * skb_h
    vb_base = vb_ptr + b * svb_b + hk * svb_h
    for n0 in range(0, L, BLOCK_N):
        n = n0 + cols
        n_ok = n < L
        acc, m_i, l_i = _attend_tile(acc, m_i, l_i, q,
                                     kb_base + n[:, None] * skb_l + dims[None, :],
                                     vb_base + n[:, None] * svb_l + dims[None, :],
                                     n_ok, qk_scale, DOT_PREC)
    out = acc / l_i[:, None]
    o_ptrs = o_ptr + b * so_b + h * so_h + rows[:, None] * so_l + dims[None, :]
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=(rows[:, None] < L) & d_ok[None, :])


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def block_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           k_block: torch.Tensor, v_block: torch.Tensor,
                           scale: float | None = None, block_n: int | None = None) -> torch.Tensor:
    """Triton block attention; same contract as the reference. q: [B, Hq, L, D]."""
    B, Hq, L, D = q.shape
    Hkv, P = k_cache.shape[1], k_cache.shape[2]
    q, k_cache, v_cache, k_block, v_block = (_last_dim_contiguous(t) for t in
                                             (q, k_cache, v_cache, k_block, v_block))
    dtype = q.dtype
    k_cache, v_cache, k_block, v_block = (t.to(dtype) for t in (k_cache, v_cache, k_block, v_block))
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q, memory_format=torch.contiguous_format)  # [B, Hq, L, D]
    block_m = min(32, next_pow2(L, 16))
    if block_n is None:
        block_n = 64 if q.is_cuda else 16
    dot_prec = "ieee" if dtype == torch.float32 else "tf32"
    grid = (B * Hq, triton.cdiv(L, block_m))
    _block_attention_kernel[grid](
        q, k_cache, v_cache, k_block, v_block, out, Hq, L, P, D, Hq // Hkv,
        scale * 1.4426950408889634,  # log2(e): the kernel uses exp2
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        k_block.stride(0), k_block.stride(1), k_block.stride(2),
        v_block.stride(0), v_block.stride(1), v_block.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=next_pow2(D, 16), DOT_PREC=dot_prec)
    return out
