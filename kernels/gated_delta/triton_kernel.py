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

Long sequences take two launches instead (as flash-linear-attention does): a parallel
"prepare" kernel computes the chunk-local terms (Tinv, W, Tinv beta v, the masked intra-chunk
attention, decayed q and k) for every chunk at once, and the sequential "scan" keeps only the
four state products per chunk. The input state is only read; the final state, when asked for,
goes to a new tensor.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._dispatch import next_pow2


@triton.jit
def _load_chunk(q_base, k_base, g_base, be_base, t, rk, sq_t, sg_t, T, DK, scale,
                L2NORM: tl.constexpr):
    """q, k: [BT, BK] float32 (normalised, q scaled), g, beta: [BT]; zeros past T and DK."""
    t_ok = t < T
    qk_ok = t_ok[:, None] & (rk < DK)[None, :]
    qc = tl.load(q_base + t[:, None] * sq_t + rk[None, :], mask=qk_ok, other=0.0).to(tl.float32)
    kc = tl.load(k_base + t[:, None] * sq_t + rk[None, :], mask=qk_ok, other=0.0).to(tl.float32)
    gc = tl.load(g_base + t * sg_t, mask=t_ok, other=0.0).to(tl.float32)
    bc = tl.load(be_base + t * sg_t, mask=t_ok, other=0.0).to(tl.float32)
    if L2NORM:
        qc = qc * tl.rsqrt(tl.sum(qc * qc, 1) + 1e-6)[:, None]
        kc = kc * tl.rsqrt(tl.sum(kc * kc, 1) + 1e-6)[:, None]
    return qc * scale, kc, gc, bc


@triton.jit
def _chunk_terms(qc, kc, gc, bc, BT: tl.constexpr, DOT_PREC: tl.constexpr):
    """Chunk-local terms: Tinv [BT, BT], W [BT, BK], attn [BT, BT], e^G q, e^{G_last - G} k,
    e^{G_last}. Padded steps have g = beta = 0 and zero q/k, so they change nothing."""
    rt = tl.arange(0, BT)
    lower = rt[:, None] >= rt[None, :]
    G = tl.cumsum(gc, 0)  # [BT]
    G_last = tl.sum(gc, 0)
    # gap: [BT, BT] = e^{G_r - G_s} on and below the diagonal, 0 above (no overflow)
    gap = tl.where(lower, tl.exp(tl.where(lower, G[:, None] - G[None, :], 0.0)), 0.0)
    kk = tl.dot(kc, tl.trans(kc), input_precision=DOT_PREC)
    Tinv = tl.where(rt[:, None] > rt[None, :], -(bc[:, None] * kk * gap), 0.0)
    for i in range(1, BT):  # forward substitution, row i uses the finished rows < i
        sel = rt[:, None] == i
        row = tl.sum(tl.where(sel, Tinv, 0.0), 0)  # [BT]
        row = row + tl.sum(row[:, None] * Tinv, 0)
        Tinv = tl.where(sel, row[None, :], Tinv)
    Tinv = Tinv + tl.where(rt[:, None] == rt[None, :], 1.0, 0.0)
    eG = tl.exp(G)
    W = tl.dot(Tinv, kc * (bc * eG)[:, None], input_precision=DOT_PREC)
    attn = tl.where(lower, tl.dot(qc, tl.trans(kc), input_precision=DOT_PREC) * gap, 0.0)
    return Tinv, W, attn, qc * eG[:, None], kc * tl.exp(G_last - G)[:, None], tl.exp(G_last)


@triton.jit
def _gated_delta_kernel(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, s0_ptr, o_ptr, sf_ptr,
                        T, H, DK, DV, group, scale,
                        sq_b, sq_t, sq_h, sv_b, sv_t, sv_h, sg_b, sg_t, sg_h, so_b, so_t, so_h,
                        HAS_STATE: tl.constexpr, STORE_STATE: tl.constexpr, L2NORM: tl.constexpr,
                        BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                        DOT_PREC: tl.constexpr):
    """Fused form: one program per (batch * head, value slice) does everything chunk by chunk."""
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
    hk = h // group
    cv = tl.program_id(1) * BV + tl.arange(0, BV)
    rk = tl.arange(0, BK)
    rt = tl.arange(0, BT)
    v_ok = cv < DV
    s_off = bh.to(tl.int64) * DK * DV + rk[:, None] * DV + cv[None, :]  # [BK, BV]
    s_ok = (rk < DK)[:, None] & v_ok[None, :]
    if HAS_STATE:
        S = tl.load(s0_ptr + s_off, mask=s_ok, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], tl.float32)
    q_base = q_ptr + b.to(tl.int64) * sq_b + hk * sq_h
    k_base = k_ptr + b.to(tl.int64) * sq_b + hk * sq_h
    v_base = v_ptr + b.to(tl.int64) * sv_b + h * sv_h
    g_base = g_ptr + b.to(tl.int64) * sg_b + h * sg_h
    be_base = b_ptr + b.to(tl.int64) * sg_b + h * sg_h
    o_base = o_ptr + b.to(tl.int64) * so_b + h * so_h
    for t0 in range(0, T, BT):
        t = t0 + rt
        tv_ok = (t < T)[:, None] & v_ok[None, :]
        qc, kc, gc, bc = _load_chunk(q_base, k_base, g_base, be_base, t, rk, sq_t, sg_t, T, DK,
                                     scale, L2NORM)
        vc = tl.load(v_base + t[:, None] * sv_t + cv[None, :], mask=tv_ok,
                     other=0.0).to(tl.float32)  # [BT, BV]
        Tinv, W, attn, q_dec, k_dec, decay = _chunk_terms(qc, kc, gc, bc, BT, DOT_PREC)
        U = tl.dot(Tinv, vc * bc[:, None], input_precision=DOT_PREC)  # [BT, BV]
        U = U - tl.dot(W, S, input_precision=DOT_PREC)
        o = tl.dot(q_dec, S, input_precision=DOT_PREC)
        o = o + tl.dot(attn, U, input_precision=DOT_PREC)  # [BT, BV]
        tl.store(o_base + t[:, None] * so_t + cv[None, :], o.to(o_ptr.dtype.element_ty),
                 mask=tv_ok)
        S = S * decay + tl.dot(tl.trans(k_dec), U, input_precision=DOT_PREC)
    if STORE_STATE:
        tl.store(sf_ptr + s_off, S, mask=s_ok)


@triton.jit
def _prepare_kernel(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, w_ptr, u_ptr, a_ptr, qd_ptr, kd_ptr,
                    d_ptr, T, H, DK, DV, group, scale, n_chunks,
                    sq_b, sq_t, sq_h, sv_b, sv_t, sv_h, sg_b, sg_t, sg_h,
                    L2NORM: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                    BDV: tl.constexpr, DOT_PREC: tl.constexpr):
    """Two-pass form, pass 1: chunk-local terms of every chunk, in parallel, to a workspace."""
    bh = tl.program_id(0)
    c = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // group
    rk = tl.arange(0, BK)
    rt = tl.arange(0, BT)
    rv = tl.arange(0, BDV)
    t = c * BT + rt
    qc, kc, gc, bc = _load_chunk(q_ptr + b.to(tl.int64) * sq_b + hk * sq_h,
                                 k_ptr + b.to(tl.int64) * sq_b + hk * sq_h,
                                 g_ptr + b.to(tl.int64) * sg_b + h * sg_h,
                                 b_ptr + b.to(tl.int64) * sg_b + h * sg_h,
                                 t, rk, sq_t, sg_t, T, DK, scale, L2NORM)
    vc = tl.load(v_ptr + b.to(tl.int64) * sv_b + h * sv_h + t[:, None] * sv_t + rv[None, :],
                 mask=(t < T)[:, None] & (rv < DV)[None, :], other=0.0).to(tl.float32)
    Tinv, W, attn, q_dec, k_dec, decay = _chunk_terms(qc, kc, gc, bc, BT, DOT_PREC)
    U0 = tl.dot(Tinv, vc * bc[:, None], input_precision=DOT_PREC)  # [BT, BDV]
    row = bh.to(tl.int64) * n_chunks * BT + t  # [BT] rows of the [B*H, T_pad, .] workspaces
    k_at = row[:, None] * DK + rk[None, :]
    k_ok = (rk < DK)[None, :]
    tl.store(w_ptr + k_at, W, mask=k_ok)
    tl.store(qd_ptr + k_at, q_dec, mask=k_ok)
    tl.store(kd_ptr + k_at, k_dec, mask=k_ok)
    tl.store(u_ptr + row[:, None] * DV + rv[None, :], U0, mask=(rv < DV)[None, :])
    tl.store(a_ptr + row[:, None] * BT + rt[None, :], attn)
    tl.store(d_ptr + bh.to(tl.int64) * n_chunks + c, decay)


@triton.jit
def _scan_kernel(w_ptr, u_ptr, a_ptr, qd_ptr, kd_ptr, d_ptr, s0_ptr, o_ptr, sf_ptr,
                 T, H, DK, DV, n_chunks, so_b, so_t, so_h,
                 HAS_STATE: tl.constexpr, STORE_STATE: tl.constexpr, BT: tl.constexpr,
                 BK: tl.constexpr, BV: tl.constexpr, DOT_PREC: tl.constexpr):
    """Two-pass form, pass 2: the sequential walk over chunks, four state products each."""
    bh = tl.program_id(0)
    b = bh // H
    h = bh % H
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
    o_base = o_ptr + b.to(tl.int64) * so_b + h * so_h
    for c in range(0, n_chunks):
        t = c * BT + rt
        row = bh.to(tl.int64) * n_chunks * BT + t
        k_at = row[:, None] * DK + rk[None, :]
        W = tl.load(w_ptr + k_at, mask=k_ok[None, :], other=0.0)  # [BT, BK]
        q_dec = tl.load(qd_ptr + k_at, mask=k_ok[None, :], other=0.0)
        k_dec = tl.load(kd_ptr + k_at, mask=k_ok[None, :], other=0.0)
        U = tl.load(u_ptr + row[:, None] * DV + cv[None, :], mask=v_ok[None, :], other=0.0)
        attn = tl.load(a_ptr + row[:, None] * BT + rt[None, :])  # [BT, BT]
        decay = tl.load(d_ptr + bh.to(tl.int64) * n_chunks + c)
        U = U - tl.dot(W, S, input_precision=DOT_PREC)  # [BT, BV]
        o = tl.dot(q_dec, S, input_precision=DOT_PREC)
        o = o + tl.dot(attn, U, input_precision=DOT_PREC)
        tl.store(o_base + t[:, None] * so_t + cv[None, :], o.to(o_ptr.dtype.element_ty),
                 mask=(t < T)[:, None] & v_ok[None, :])
        S = S * decay + tl.dot(tl.trans(k_dec), U, input_precision=DOT_PREC)
    if STORE_STATE:
        tl.store(sf_ptr + s_off, S, mask=s_ok)


def chunk_gated_delta_rule_triton(q, k, v, g, beta, initial_state=None, output_final_state=False,
                                  chunk_size=16, scale=None, use_qk_l2norm=False,
                                  block_t: int | None = None, block_v: int | None = None,
                                  dot_precision: str | None = None, num_warps: int | None = None,
                                  two_pass: bool | None = None):
    """Triton chunked gated delta rule; same contract as the reference.

    The kernel's chunk is block_t steps (default 16: tl.dot needs 16 rows, and larger chunks
    spill registers on sm_90); chunk_size only matters to the reference, the result does not
    depend on it beyond rounding. dot_precision defaults to "tf32x3" on CUDA (three tf32
    tensor-core products, close to fp32; plain fp32 "ieee" dots spill heavily) and "ieee" in
    the interpreter; "tf32" is the fastest and loosest. two_pass (default: more than 4 chunks)
    selects the prepare + scan launches over the fused kernel.
    """
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if k.stride() != q.stride():
        k = k.contiguous()
        q = q.contiguous()
    g = g.float().contiguous()
    beta = beta.float().contiguous()
    dev = v.device
    o = torch.empty(B, T, Hv, Dv, dtype=q.dtype, device=dev)  # [B, T, Hv, Dv]
    state_out = torch.empty(B, Hv, Dk, Dv, dtype=torch.float32, device=dev) \
        if output_final_state else o  # placeholder pointer when not stored
    s0 = initial_state.contiguous() if initial_state is not None else o
    cuda = v.is_cuda
    bt = block_t or 16
    bk = next_pow2(Dk, 16)
    if block_v is None:
        block_v = min(next_pow2(Dv, 16), 32 if cuda else 64)
    dot_precision = dot_precision or ("tf32x3" if cuda else "ieee")
    warps = num_warps or (8 if cuda else 4)
    scale = Dk ** -0.5 if scale is None else float(scale)
    flags = dict(HAS_STATE=initial_state is not None, STORE_STATE=bool(output_final_state))
    grid = (B * Hv, triton.cdiv(Dv, block_v))
    n_chunks = triton.cdiv(T, bt)
    in_strides = (q.stride(0), q.stride(1), q.stride(2), v.stride(0), v.stride(1), v.stride(2),
                  g.stride(0), g.stride(1), g.stride(2))
    o_strides = (o.stride(0), o.stride(1), o.stride(2))
    if not (n_chunks > 4 if two_pass is None else two_pass):
        _gated_delta_kernel[grid](
            q, k, v, g, beta, s0, o, state_out, T, Hv, Dk, Dv, Hv // Hk, scale,
            *in_strides, *o_strides, **flags, L2NORM=bool(use_qk_l2norm), BT=bt, BK=bk,
            BV=block_v, DOT_PREC=dot_precision, num_warps=warps)
        return o, (state_out if output_final_state else None)
    rows = B * Hv * n_chunks * bt
    f32 = dict(dtype=torch.float32, device=dev)
    w, q_dec, k_dec = (torch.empty(rows, Dk, **f32) for _ in range(3))  # [B*Hv*T_pad, Dk]
    u0 = torch.empty(rows, Dv, **f32)  # [B*Hv*T_pad, Dv]
    attn = torch.empty(rows, bt, **f32)  # [B*Hv*T_pad, BT]
    decay = torch.empty(B * Hv * n_chunks, **f32)
    _prepare_kernel[(B * Hv, n_chunks)](
        q, k, v, g, beta, w, u0, attn, q_dec, k_dec, decay, T, Hv, Dk, Dv, Hv // Hk, scale,
        n_chunks, *in_strides, L2NORM=bool(use_qk_l2norm), BT=bt, BK=bk,
        BDV=next_pow2(Dv, 16), DOT_PREC=dot_precision, num_warps=warps)
    _scan_kernel[grid](
        w, u0, attn, q_dec, k_dec, decay, s0, o, state_out, T, Hv, Dk, Dv, n_chunks, *o_strides,
        **flags, BT=bt, BK=bk, BV=block_v, DOT_PREC=dot_precision, num_warps=warps)
    return o, (state_out if output_final_state else None)
