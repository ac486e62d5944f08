"""Plain-torch gated delta rule (Gated DeltaNet: Yang, Kautz & Hatamizadeh 2024, "Gated Delta
Networks: Improving Mamba2 with Delta Rule"), in the conventions of transformers' Qwen3-Next /
Qwen3.5 layers: q, k: [B, T, Hk, Dk]; v: [B, T, Hv, Dv]; g (log decay, <= 0), beta: [B, T, Hv];
state: [B, Hv, Dk, Dv]; value head h reads query/key head h // (Hv // Hk); queries are scaled
by Dk ** -0.5 after the optional L2 norm; all arithmetic in float32; the output has q's dtype and
the final state is float32.

Per head, with S the [Dk, Dv] state:  S_t = exp(g_t) S_{t-1} + k_t u_t^T,
u_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t),  o_t = S_t^T q_t.
"""
from __future__ import annotations

import torch


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum x^2 + eps) over the last dim (the flash-linear-attention convention)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def check_shapes(q, k, v, g, beta, initial_state) -> None:
    """Raise ValueError with the shapes when the inputs do not fit the contract."""
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    if k.shape != q.shape or v.shape[:2] != (B, T) or g.shape != (B, T, Hv) \
            or beta.shape != (B, T, Hv):
        raise ValueError(f"gated delta rule: bad shapes q {tuple(q.shape)} k {tuple(k.shape)} "
                         f"v {tuple(v.shape)} g {tuple(g.shape)} beta {tuple(beta.shape)}")
    if Hv % Hk:
        raise ValueError(f"gated delta rule: value heads {Hv} not a multiple of key heads {Hk}")
    if initial_state is not None and initial_state.shape != (B, Hv, Dk, Dv):
        raise ValueError(f"gated delta rule: initial_state {tuple(initial_state.shape)} != "
                         f"{(B, Hv, Dk, Dv)}")


def prepare_inputs(q, k, v, g, beta, initial_state, scale, use_qk_l2norm):
    """Validate shapes and bring everything to float32, head-major [B, H, T, ...] layout.

    Returns (q, k, v, g, beta, state) with q, k: [B, Hv, T, Dk] (heads repeated for groups),
    v: [B, Hv, T, Dv], g, beta: [B, Hv, T], state: [B, Hv, Dk, Dv] (a fresh tensor).
    """
    check_shapes(q, k, v, g, beta, initial_state)
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2], v.shape[3]
    q, k = q.float(), k.float()
    if use_qk_l2norm:
        q, k = _l2norm(q), _l2norm(k)
    q = q * (Dk ** -0.5 if scale is None else scale)
    if Hv != Hk:
        q = q.repeat_interleave(Hv // Hk, dim=2)
        k = k.repeat_interleave(Hv // Hk, dim=2)
    q, k, v, g, beta = (x.transpose(1, 2).float().contiguous() for x in (q, k, v, g, beta))
    if initial_state is None:
        state = torch.zeros(B, Hv, Dk, Dv, dtype=torch.float32, device=v.device)
    else:
        state = initial_state.to(device=v.device, dtype=torch.float32).clone()
    return q, k, v, g, beta, state


def recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=None, output_final_state=False,
                               scale=None, use_qk_l2norm=False):
    """Ground truth: one state update per time step, float32. Same contract as the chunked form.

    Returns (o: [B, T, Hv, Dv] in q's dtype, final state [B, Hv, Dk, Dv] float32 or None).
    """
    out_dtype = q.dtype
    q, k, v, g, beta, S = prepare_inputs(q, k, v, g, beta, initial_state, scale, use_qk_l2norm)
    o = torch.empty_like(v)  # [B, H, T, Dv]
    for t in range(v.shape[2]):
        S = S * g[:, :, t].exp()[..., None, None]  # [B, H, Dk, Dv]
        pred = torch.einsum("bhkv,bhk->bhv", S, k[:, :, t])  # [B, H, Dv]
        u = beta[:, :, t, None] * (v[:, :, t] - pred)
        S = S + k[:, :, t, :, None] * u[:, :, None, :]
        o[:, :, t] = torch.einsum("bhkv,bhk->bhv", S, q[:, :, t])
    return o.transpose(1, 2).contiguous().to(out_dtype), (S if output_final_state else None)


def chunk_gated_delta_rule_reference(q, k, v, g, beta, initial_state=None,
                                     output_final_state=False, chunk_size=16, scale=None,
                                     use_qk_l2norm=False):
    """Chunked gated delta rule in torch (the WY / UT-transform form of the DeltaNet papers).

    Inside a chunk of C steps with cumulative log decay G_r and chunk-start state S0:
    (I + A) U = diag(beta) (V - diag(e^G) K S0), A[r, s] = beta_r e^{G_r - G_s} k_r.k_s (s < r);
    O = diag(e^G) Q S0 + (Q K^T * e^{G_r - G_s} * [s <= r]) U;
    S_C = e^{G_C} S0 + (e^{G_C - G} K)^T U.
    Returns (o: [B, T, Hv, Dv] in q's dtype, final state float32 or None).
    """
    out_dtype = q.dtype
    q, k, v, g, beta, S = prepare_inputs(q, k, v, g, beta, initial_state, scale, use_qk_l2norm)
    B, H, T, Dk = k.shape
    C = int(chunk_size)
    pad = (-T) % C
    if pad:  # padded steps have g = beta = 0 and zero vectors: they change nothing
        q, k, v = (torch.nn.functional.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (torch.nn.functional.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // C
    q, k, v = (x.reshape(B, H, n, C, x.shape[-1]) for x in (q, k, v))  # [B, H, n, C, D]
    G = g.reshape(B, H, n, C).cumsum(-1)  # [B, H, n, C]
    beta = beta.reshape(B, H, n, C)
    lower = torch.ones(C, C, dtype=torch.bool, device=v.device).tril()  # s <= r
    gap = (G[..., :, None] - G[..., None, :]).masked_fill(~lower, float("-inf")).exp()  # [.., C, C]
    eye = torch.eye(C, device=v.device)
    A = (beta[..., None] * (k @ k.transpose(-1, -2)) * gap).tril(-1)  # [B, H, n, C, C]
    w = torch.linalg.solve_triangular(eye + A, (beta * G.exp())[..., None] * k, upper=False,
                                      unitriangular=True)  # [B, H, n, C, Dk]
    u0 = torch.linalg.solve_triangular(eye + A, beta[..., None] * v, upper=False,
                                       unitriangular=True)  # [B, H, n, C, Dv]
    attn = (q @ k.transpose(-1, -2)) * gap  # [B, H, n, C, C], zero above the diagonal
    q_dec = q * G.exp()[..., None]
    k_dec = k * (G[..., -1:] - G).exp()[..., None]
    o = torch.empty_like(v)
    for i in range(n):
        u = u0[:, :, i] - w[:, :, i] @ S  # [B, H, C, Dv]
        o[:, :, i] = q_dec[:, :, i] @ S + attn[:, :, i] @ u
        S = S * G[:, :, i, -1].exp()[..., None, None] + k_dec[:, :, i].transpose(-1, -2) @ u
    o = o.reshape(B, H, n * C, v.shape[-1])[:, :, :T]
    return o.transpose(1, 2).contiguous().to(out_dtype), (S if output_final_state else None)
