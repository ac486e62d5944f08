"""Chunked gated delta rule in Triton.

The chunked (WY / UT-transform) formulation of DeltaNet and Gated DeltaNet: Yang et al. 2024,
"Parallelizing Linear Transformers with the Delta Rule over Sequence Length" and "Gated Delta
Networks: Improving Mamba2 with Delta Rule"; the flash-linear-attention project
(github.com/fla-org/flash-linear-attention) computes it with several Triton kernels. This is one
self-contained kernel: a program owns one (batch, value head, slice of value dims) and walks the
chunks in order, keeping the [Dk, BV] state slice in registers. Value dims are independent in
the delta rule, so slices need no communication. Per chunk of BT steps (cumulative log decay G):

    A    = strict_lower(beta_r e^{G_r - G_s} k_r . k_s)
    Tinv = (I + A)^{-1}   (forward substitution)
    W    = Tinv (beta e^G k),   U = Tinv (beta v) - W S
    O    = (e^G q) S + (lower(q k^T e^{G_r - G_s})) U
    S    = e^{G_last} S + (e^{G_last - G} k)^T U

The input state is only read; the final state, when asked for, goes to a new tensor.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._dispatch import next_pow2


@triton.jit
def _gated_delta_kernel(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, s0_ptr, o_ptr, sf_ptr,
                        T, H, DK, DV, group, scale,
                        sq_b, sq_t, sq_h, sv_b, sv_t, sv_h, sg_b, sg_t, sg_h, so_b, so_t, so_h,
                        HAS_STATE: tl.constexpr, STORE_STATE: tl.constexpr, L2NORM: tl.constexpr,
                        BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                        DOT_PREC: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    hk = h // group
    cv = tl.program_id(1) * BV + tl.arange(0, BV)
    rk = tl.arange(0, BK)
    rt = tl.arange(0, BT)
    v_ok = cv < DV
    k_ok = rk < DK
    s_off = bh.to(tl.int64) * DK * DV + rk[:, None] * DV + cv[None, :]  # [BK, BV]
    s_ok = k_ok[:, None] & v_ok[None, :]
    if HAS_STATE:
        S = tl.load(s0_ptr + s_off, mask=s_ok, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], tl.float32)
    lower = rt[:, None] >= rt[None, :]
    strict = rt[:, None] > rt[None, :]
    eye = tl.where(rt[:, None] == rt[None, :], 1.0, 0.0)
    q_base = q_ptr + b.to(tl.int64) * sq_b + hk * sq_h
    k_base = k_ptr + b.to(tl.int64) * sq_b + hk * sq_h
    v_base = v_ptr + b.to(tl.int64) * sv_b + h * sv_h
    g_base = g_ptr + b.to(tl.int64) * sg_b + h * sg_h
    be_base = b_ptr + b.to(tl.int64) * sg_b + h * sg_h
    o_base = o_ptr + b.to(tl.int64) * so_b + h * so_h
    for t0 in range(0, T, BT):
        t = t0 + rt
        t_ok = t < T
        qk_ok = t_ok[:, None] & k_ok[None, :]
        qc = tl.load(q_base + t[:, None] * sq_t + rk[None, :], mask=qk_ok, other=0.0).to(tl.float32)
        kc = tl.load(k_base + t[:, None] * sq_t + rk[None, :], mask=qk_ok, other=0.0).to(tl.float32)
        vc = tl.load(v_base + t[:, None] * sv_t + cv[None, :], mask=t_ok[:, None] & v_ok[None, :],
                     other=0.0).to(tl.float32)  # [BT, BV]
        gc = tl.load(g_base + t * sg_t, mask=t_ok, other=0.0).to(tl.float32)  # [BT]
        bc = tl.load(be_base + t * sg_t, mask=t_ok, other=0.0).to(tl.float32)
        if L2NORM:
            qc = qc * tl.rsqrt(tl.sum(qc * qc, 1) + 1e-6)[:, None]
            kc = kc * tl.rsqrt(tl.sum(kc * kc, 1) + 1e-6)[:, None]
        qc = qc * scale
        G = tl.cumsum(gc, 0)  # [BT]; padded steps add 0, so G[-1] is the last real step's
        G_last = tl.sum(gc, 0)
        # gap: [BT, BT] = e^{G_r - G_s} on and below the diagonal, 0 above (no overflow)
        gap = tl.where(lower, tl.exp(tl.where(lower, G[:, None] - G[None, :], 0.0)), 0.0)
        kk = tl.dot(kc, tl.trans(kc), input_precision=DOT_PREC)
        Tinv = tl.where(strict, -(bc[:, None] * kk * gap), 0.0)
        for i in range(1, BT):  # forward substitution, row i uses the finished rows < i
            sel = rt[:, None] == i
            row = tl.sum(tl.where(sel, Tinv, 0.0), 0)  # [BT]
            row = row + tl.sum(row[:, None] * Tinv, 0)
            Tinv = tl.where(sel, row[None, :], Tinv)
        Tinv = Tinv + eye
        eG = tl.exp(G)
        W = tl.dot(Tinv, kc * (bc * eG)[:, None], input_precision=DOT_PREC)  # [BT, BK]
        U = tl.dot(Tinv, vc * bc[:, None], input_precision=DOT_PREC)  # [BT, BV]
        U = U - tl.dot(W, S, input_precision=DOT_PREC)
        attn = tl.where(lower, tl.dot(qc, tl.trans(kc), input_precision=DOT_PREC) * gap, 0.0)
        o = tl.dot(qc * eG[:, None], S, input_precision=DOT_PREC)
        o = o + tl.dot(attn, U, input_precision=DOT_PREC)  # [BT, BV]
        tl.store(o_base + t[:, None] * so_t + cv[None, :], o.to(o_ptr.dtype.element_ty),
                 mask=t_ok[:, None] & v_ok[None, :])
        k_dec = kc * tl.exp(G_last - G)[:, None]
        S = S * tl.exp(G_last) + tl.dot(tl.trans(k_dec), U, input_precision=DOT_PREC)
    if STORE_STATE:
        tl.store(sf_ptr + s_off, S, mask=s_ok)


def chunk_gated_delta_rule_triton(q, k, v, g, beta, initial_state=None, output_final_state=False,
                                  chunk_size=16, scale=None, use_qk_l2norm=False,
                                  block_t: int | None = None, block_v: int | None = None,
                                  dot_precision: str | None = None, num_warps: int | None = None):
    """Triton chunked gated delta rule; same contract as the reference.

    The kernel's chunk is block_t steps (default 16: tl.dot needs 16 rows, and larger chunks
    spill registers on sm_90); chunk_size only matters to the reference, the result does not
    depend on it beyond rounding. dot_precision defaults to "tf32x3" on CUDA (three tf32
    tensor-core products, close to fp32; plain fp32 "ieee" dots spill heavily) and "ieee" in
    the interpreter; "tf32" is the fastest and loosest.
    """
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if k.stride() != q.stride():
        k = k.contiguous()
        q = q.contiguous()
    g = g.float().contiguous()
    beta = beta.float().contiguous()
    o = torch.empty(B, T, Hv, Dv, dtype=q.dtype, device=v.device)
    state_out = torch.empty(B, Hv, Dk, Dv, dtype=torch.float32, device=v.device) \
        if output_final_state else o  # placeholder pointer when not stored
    s0 = initial_state.contiguous() if initial_state is not None else o
    cuda = v.is_cuda
    bt = block_t or 16
    if block_v is None:
        block_v = min(next_pow2(Dv, 16), 32 if cuda else 64)
    dot_precision = dot_precision or ("tf32x3" if cuda else "ieee")
    grid = (B * Hv, triton.cdiv(Dv, block_v))
    _gated_delta_kernel[grid](
        q, k, v, g, beta, s0, o, state_out, T, Hv, Dk, Dv, Hv // Hk,
        Dk ** -0.5 if scale is None else float(scale),
        q.stride(0), q.stride(1), q.stride(2), v.stride(0), v.stride(1), v.stride(2),
        g.stride(0), g.stride(1), g.stride(2), o.stride(0), o.stride(1), o.stride(2),
        HAS_STATE=initial_state is not None, STORE_STATE=bool(output_final_state),
        L2NORM=bool(use_qk_l2norm), BT=bt, BK=next_pow2(Dk, 16), BV=block_v,
        DOT_PREC=dot_precision, num_warps=num_warps or (8 if cuda else 4))
    return o, (state_out if output_final_state else None)
