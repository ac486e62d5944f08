"""Flash-style block attention in Triton.

The online softmax of FlashAttention (Dao et al. 2022, "FlashAttention: Fast and
Memory-Efficient Exact Attention with IO-Awareness") streams the cached keys/values and then the
block's own keys/values in tiles; the L x (P + L) score matrix is never materialised.
Two decode-time refinements:
- grouped-query packing: the `group` query heads that share a key/value head are one tile of
  group * L rows, so each key/value tile is loaded once per group, not once per query head;
- split over the cache (Flash-Decoding, Dao et al. 2023): with few (batch, head) pairs the
  cached positions are split across programs, each writes a normalised partial output and its
  log-sum-exp, and a small combine kernel merges them.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._dispatch import next_pow2

LOG2E = 1.4426950408889634


@triton.jit
def _attend_tile(acc, m_i, l_i, q, k_ptrs, v_ptrs, kv_ok, allowed, qk_scale,
                 DOT_PREC: tl.constexpr):
    """Fold one tile of keys/values into the running (acc, max, sum) of the online softmax.

    kv_ok [BLOCK_N, BLOCK_D]: elements that exist (key index and head dim: with D below BLOCK_D
    an unmasked load reads the next row or past the tensor, and 0 * NaN poisons the scores);
    allowed [BLOCK_M, BLOCK_N]: pairs that may attend.
    """
    k = tl.load(k_ptrs, mask=kv_ok, other=0.0)  # [BLOCK_N, BLOCK_D]
    v = tl.load(v_ptrs, mask=kv_ok, other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # [BLOCK_M, BLOCK_N], log2
    s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PREC)
    return acc, m_new, l_i


@triton.jit
def _block_attention_kernel(q_ptr, kc_ptr, vc_ptr, kb_ptr, vb_ptr, o_ptr, ws_ptr, lse_ptr,
                            Hkv, L, P, D, group, split_len, nsplit, block_size, qk_scale,
                            sq_b, sq_h, sq_l, skc_b, skc_h, skc_p, svc_b, svc_h, svc_p,
                            skb_b, skb_h, skb_l, svb_b, svb_h, svb_l, so_b, so_h, so_l,
                            SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_D: tl.constexpr, DOT_PREC: tl.constexpr):
    bh = tl.program_id(0)  # b * Hkv + key/value head
    b = bh // Hkv
    hk = bh % Hkv
    split = tl.program_id(2)
    R = group * L  # packed rows: (query head in group, block position)
    r = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = r < R
    hq = hk * group + r // L
    pos = r % L
    dims = tl.arange(0, BLOCK_D)
    cols = tl.arange(0, BLOCK_N)
    d_ok = dims < D
    rd_ok = r_ok[:, None] & d_ok[None, :]
    q = tl.load(q_ptr + b * sq_b + hq[:, None] * sq_h + pos[:, None] * sq_l + dims[None, :],
                mask=rd_ok, other=0.0)  # [BLOCK_M, BLOCK_D]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    kc_base = kc_ptr + b * skc_b + hk * skc_h
    vc_base = vc_ptr + b * svc_b + hk * svc_h
    p_start = split * split_len
    p_stop = tl.minimum(p_start + split_len, P)
    for n0 in range(p_start, p_stop, BLOCK_N):
        n = n0 + cols
        n_ok = n < p_stop
        acc, m_i, l_i = _attend_tile(acc, m_i, l_i, q,
                                     kc_base + n[:, None] * skc_p + dims[None, :],
                                     vc_base + n[:, None] * svc_p + dims[None, :],
                                     n_ok[:, None] & d_ok[None, :], n_ok[None, :], qk_scale,
                                     DOT_PREC)
    kb_base = kb_ptr + b * skb_b + hk * skb_h
    vb_base = vb_ptr + b * svb_b + hk * svb_h
    block_len = tl.where(split == 0, L, 0)  # the first split also reads the block itself
    for n0 in range(0, block_len, BLOCK_N):
        n = n0 + cols
        n_ok = n < L
        allowed = n_ok[None, :] & ((n // block_size)[None, :] <= (pos // block_size)[:, None])
        acc, m_i, l_i = _attend_tile(acc, m_i, l_i, q,
                                     kb_base + n[:, None] * skb_l + dims[None, :],
                                     vb_base + n[:, None] * svb_l + dims[None, :],
                                     n_ok[:, None] & d_ok[None, :], allowed, qk_scale, DOT_PREC)
    has = l_i > 0
    out = acc / tl.where(has, l_i, 1.0)[:, None]
    if SPLIT:
        at = (bh * nsplit + split) * R + r  # [BLOCK_M] rows of the workspace [B*Hkv, S, R, D]
        tl.store(ws_ptr + at[:, None] * D + dims[None, :], out, mask=rd_ok)
        lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        tl.store(lse_ptr + at, lse, mask=r_ok)
    else:
        tl.store(o_ptr + b * so_b + hq[:, None] * so_h + pos[:, None] * so_l + dims[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=rd_ok)


@triton.jit
def _combine_kernel(ws_ptr, lse_ptr, o_ptr, Hkv, L, D, group, nsplit, so_b, so_h, so_l,
                    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // Hkv
    hk = bh % Hkv
    R = group * L
    r = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = r < R
    dims = tl.arange(0, BLOCK_D)
    rd_ok = r_ok[:, None] & (dims < D)[None, :]
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    w_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for s in range(0, nsplit):
        at = (bh * nsplit + s) * R + r
        lse = tl.load(lse_ptr + at, mask=r_ok, other=0.0)
        part = tl.load(ws_ptr + at[:, None] * D + dims[None, :], mask=rd_ok, other=0.0)
        m_new = tl.maximum(m, lse)
        alpha = tl.exp2(m - m_new)
        w = tl.exp2(lse - m_new)
        acc = acc * alpha[:, None] + w[:, None] * part
        w_sum = w_sum * alpha + w
        m = m_new
    hq = hk * group + r // L
    pos = r % L
    tl.store(o_ptr + b * so_b + hq[:, None] * so_h + pos[:, None] * so_l + dims[None, :],
             (acc / w_sum[:, None]).to(o_ptr.dtype.element_ty), mask=rd_ok)


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _auto_splits(programs: int, P: int, block_n: int, device: torch.device) -> int:
    """Cache splits: enough programs to fill the GPU, at least 512 cached keys per split."""
    if device.type != "cuda":
        return 1 if P < 2 * block_n else 2
    target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(-(-target // programs), P // 512))


def block_attention_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           k_block: torch.Tensor, v_block: torch.Tensor,
                           scale: float | None = None, block_size: int | None = None,
                           block_n: int | None = None,
                           num_splits: int | None = None) -> torch.Tensor:
    """Triton block attention; same contract as the reference. q: [B, Hq, L, D].

    block_n (keys per tile) and num_splits (cache splits, Flash-Decoding) default to values
    chosen for the device.
    """
    B, Hq, L, D = q.shape
    Hkv, P = k_cache.shape[1], k_cache.shape[2]
    group = Hq // Hkv
    q, k_cache, v_cache, k_block, v_block = (_last_dim_contiguous(t) for t in
                                             (q, k_cache, v_cache, k_block, v_block))
    dtype = q.dtype
    k_cache, v_cache, k_block, v_block = (t.to(dtype) for t in (k_cache, v_cache, k_block, v_block))
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q, memory_format=torch.contiguous_format)  # [B, Hq, L, D]
    R = group * L
    block_m = min(64, next_pow2(R, 16))
    block_d = next_pow2(D, 16)
    if block_n is None:
        block_n = 64 if q.is_cuda else 16
    m_tiles = triton.cdiv(R, block_m)
    nsplit = num_splits or _auto_splits(B * Hkv * m_tiles, P, block_n, q.device)
    nsplit = max(1, min(nsplit, triton.cdiv(P, block_n)))
    split_len = triton.cdiv(triton.cdiv(max(P, 1), nsplit), block_n) * block_n
    nsplit = max(1, triton.cdiv(P, split_len))  # every split holds at least one cached key
    if nsplit > 1:
        ws = torch.empty(B * Hkv, nsplit, R, D, dtype=torch.float32, device=q.device)
        lse = torch.empty(B * Hkv, nsplit, R, dtype=torch.float32, device=q.device)
    else:
        ws = lse = out  # unused placeholders
    dot_prec = "ieee" if dtype == torch.float32 else "tf32"
    _block_attention_kernel[(B * Hkv, m_tiles, nsplit)](
        q, k_cache, v_cache, k_block, v_block, out, ws, lse, Hkv, L, P, D, group, split_len,
        nsplit, block_size or max(L, 1), scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        k_block.stride(0), k_block.stride(1), k_block.stride(2),
        v_block.stride(0), v_block.stride(1), v_block.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        SPLIT=nsplit > 1, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, DOT_PREC=dot_prec,
        num_warps=8 if block_m * block_d >= 64 * 128 else 4)  # 4 warps spill at 64 x 128 (sm_90)
    if nsplit > 1:
        combine_m = 16  # memory-bound merge: small row tiles keep the fp32 accumulator small
        _combine_kernel[(B * Hkv, triton.cdiv(R, combine_m))](
            ws, lse, out, Hkv, L, D, group, nsplit, out.stride(0), out.stride(1), out.stride(2),
            BLOCK_M=combine_m, BLOCK_D=block_d)
    return out
