"""Gated delta rule: recurrent ground truth vs a naive loop and transformers; the chunked
reference and the Triton kernel (interpreted) vs the recurrent form."""
import pytest
import torch

from clover_cli.kernels.gated_delta import (chunk_gated_delta_rule,
                                            chunk_gated_delta_rule_reference,
                                            recurrent_gated_delta_rule)


def _inputs(B, T, Hk, Hv, Dk, Dv, seed, with_state=True, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, Hk, Dk, generator=gen)  # [B, T, Hk, Dk]
    k = torch.randn(B, T, Hk, Dk, generator=gen)
    v = torch.randn(B, T, Hv, Dv, generator=gen)  # [B, T, Hv, Dv]
    g = -torch.rand(B, T, Hv, generator=gen) * 0.5  # log decay <= 0
    beta = torch.rand(B, T, Hv, generator=gen)
    state = torch.randn(B, Hv, Dk, Dv, generator=gen) if with_state else None
    return (q.to(dtype), k.to(dtype), v.to(dtype), g, beta, state)


def _naive(q, k, v, g, beta, state):
    """Scalar-readable loop over batch, head and time with explicit vectors (float64)."""
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    out = torch.zeros(B, T, Hv, Dv, dtype=torch.float64)
    final = torch.zeros(B, Hv, Dk, Dv, dtype=torch.float64)
    for b in range(B):
        for h in range(Hv):
            hk = h // (Hv // Hk)
            S = state[b, h].double().clone() if state is not None else torch.zeros(Dk, Dv).double()
            for t in range(T):
                qt = q[b, t, hk].double()
                qt = qt / torch.sqrt((qt * qt).sum() + 1e-6) * Dk ** -0.5
                kt = k[b, t, hk].double()
                kt = kt / torch.sqrt((kt * kt).sum() + 1e-6)
                S = S * torch.exp(g[b, t, h].double())
                delta = beta[b, t, h].double() * (v[b, t, h].double() - kt @ S)
                S = S + torch.outer(kt, delta)
                out[b, t, h] = qt @ S
            final[b, h] = S
    return out, final


def test_recurrent_matches_naive_loop(rms_rel):
    x = _inputs(2, 9, 1, 2, 6, 5, seed=1)
    o, s = recurrent_gated_delta_rule(*x, output_final_state=True, use_qk_l2norm=True)
    no, ns = _naive(*x)
    assert rms_rel(o, no) < 1e-6 and rms_rel(s, ns) < 1e-6


@pytest.mark.parametrize("l2", [pytest.param(True, id="l2norm"), pytest.param(False, id="raw-qk")])
def test_recurrent_and_chunked_match_transformers(l2, rms_rel):
    mod = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    q, k, v, g, beta, s0 = _inputs(1, 21, 2, 4, 8, 6, seed=2)
    if not l2:
        k = k / k.norm(dim=-1, keepdim=True)
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, s0, True, use_qk_l2norm=l2)
    to, ts = mod.torch_recurrent_gated_delta_rule(q, k, v, g, beta, s0, True,
                                                  use_qk_l2norm_in_kernel=l2)
    assert rms_rel(o, to) < 1e-6 and rms_rel(s, ts) < 1e-6
    co, cs = chunk_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=s0,
                                    output_final_state=True, use_qk_l2norm_in_kernel=l2)
    assert rms_rel(co, to) < 1e-5 and rms_rel(cs, ts) < 1e-5


CASES = [  # B, T, Hk, Hv, Dk, Dv, chunk, with_state
    pytest.param(1, 1, 1, 1, 16, 16, 16, True, id="T1-C16-state"),
    pytest.param(2, 31, 2, 2, 16, 8, 8, True, id="T31-C8-state"),
    pytest.param(1, 32, 1, 2, 16, 16, 32, True, id="T32-C32-grouped2-state"),
    pytest.param(1, 33, 2, 4, 8, 12, 16, True, id="T33-C16-grouped2-Dk8-Dv12"),
    pytest.param(1, 63, 1, 1, 32, 16, 4, False, id="T63-C4-nostate"),
]


@pytest.mark.parametrize("B,T,Hk,Hv,Dk,Dv,chunk,with_state", CASES)
def test_chunked_reference_matches_recurrent(B, T, Hk, Hv, Dk, Dv, chunk, with_state, rms_rel):
    x = _inputs(B, T, Hk, Hv, Dk, Dv, seed=T, with_state=with_state)
    o, s = recurrent_gated_delta_rule(*x, output_final_state=True, use_qk_l2norm=True)
    co, cs = chunk_gated_delta_rule_reference(*x, output_final_state=True, chunk_size=chunk,
                                              use_qk_l2norm=True)
    assert rms_rel(co, o) < 1e-5 and rms_rel(cs, s) < 1e-5


@pytest.mark.parametrize("B,T,Hk,Hv,Dk,Dv,chunk,with_state", CASES)
def test_triton_matches_recurrent(B, T, Hk, Hv, Dk, Dv, chunk, with_state, rms_rel):
    from clover_cli.kernels.gated_delta.triton_kernel import chunk_gated_delta_rule_triton
    x = _inputs(B, T, Hk, Hv, Dk, Dv, seed=T + 1, with_state=with_state)
    o, s = recurrent_gated_delta_rule(*x, output_final_state=True, use_qk_l2norm=True)
    to, ts = chunk_gated_delta_rule_triton(*x, output_final_state=True, chunk_size=chunk,
                                           use_qk_l2norm=True, block_t=max(chunk, 16))
    assert to.shape == o.shape and ts.dtype == torch.float32
    assert rms_rel(to, o) < 1e-5 and rms_rel(ts, s) < 1e-5


@pytest.mark.parametrize("B,T,Hk,Hv,Dk,Dv,with_state", [
    pytest.param(1, 1, 1, 1, 16, 16, True, id="T1-state"),
    pytest.param(2, 33, 1, 2, 8, 12, True, id="T33-grouped2-Dk8-Dv12"),
    pytest.param(1, 63, 1, 1, 16, 16, False, id="T63-nostate"),
])
def test_triton_two_pass_matches_recurrent(B, T, Hk, Hv, Dk, Dv, with_state, rms_rel):
    """The prepare + scan launches (used for long sequences) agree like the fused kernel."""
    from clover_cli.kernels.gated_delta.triton_kernel import chunk_gated_delta_rule_triton
    x = _inputs(B, T, Hk, Hv, Dk, Dv, seed=T + 2, with_state=with_state)
    o, s = recurrent_gated_delta_rule(*x, output_final_state=True, use_qk_l2norm=True)
    to, ts = chunk_gated_delta_rule_triton(*x, output_final_state=True, use_qk_l2norm=True,
                                           two_pass=True)
    assert rms_rel(to, o) < 1e-5 and rms_rel(ts, s) < 1e-5
    peek, none = chunk_gated_delta_rule_triton(*x, use_qk_l2norm=True, two_pass=True)
    assert none is None and torch.equal(peek, to)


def test_triton_reads_views_split_from_one_projection(rms_rel, force_triton):
    """q, k, v as transformers makes them: reshaped slices of one mixed projection."""
    gen = torch.Generator().manual_seed(12)
    B, T, H, Dk, Dv = 1, 19, 2, 16, 8
    mixed = torch.randn(B, T, 2 * H * Dk + H * Dv, generator=gen)  # [B, T, conv_dim]
    q, k, v = torch.split(mixed, [H * Dk, H * Dk, H * Dv], dim=-1)
    q, k, v = q.reshape(B, T, H, Dk), k.reshape(B, T, H, Dk), v.reshape(B, T, H, Dv)
    assert not q.is_contiguous()
    g = -torch.rand(B, T, H, generator=gen)
    beta = torch.rand(B, T, H, generator=gen)
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, None, True, use_qk_l2norm=True)
    to, ts = chunk_gated_delta_rule(q, k, v, g, beta, None, True, use_qk_l2norm=True)
    assert rms_rel(to, o) < 1e-5 and rms_rel(ts, s) < 1e-5


def test_triton_without_l2norm_and_custom_scale(rms_rel):
    from clover_cli.kernels.gated_delta.triton_kernel import chunk_gated_delta_rule_triton
    q, k, v, g, beta, s0 = _inputs(1, 20, 2, 2, 16, 16, seed=4)
    k = k / k.norm(dim=-1, keepdim=True)
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, s0, True, scale=0.1)
    to, ts = chunk_gated_delta_rule_triton(q, k, v, g, beta, s0, True, scale=0.1)
    assert rms_rel(to, o) < 1e-5 and rms_rel(ts, s) < 1e-5


@pytest.mark.parametrize("forced", [pytest.param(False, id="reference"),
                                    pytest.param(True, id="triton")])
def test_denoise_reads_state_and_commit_continues_it(forced, monkeypatch, rms_rel):
    """Two 32-step blocks chained through the state equal one 64-step call; reading never writes."""
    if forced:
        monkeypatch.setenv("CLOVER_FORCE_TRITON", "1")
    q, k, v, g, beta, s0 = _inputs(1, 64, 2, 2, 16, 16, seed=7)
    committed = s0.clone()
    o_full, s_full = chunk_gated_delta_rule(q, k, v, g, beta, s0, True, use_qk_l2norm=True)
    first = slice(0, 32)
    o_peek, none = chunk_gated_delta_rule(q[:, first], k[:, first], v[:, first], g[:, first],
                                          beta[:, first], s0, False, use_qk_l2norm=True)
    assert none is None and torch.equal(s0, committed)  # bitwise untouched
    o1, s1 = chunk_gated_delta_rule(q[:, first], k[:, first], v[:, first], g[:, first],
                                    beta[:, first], s0, True, use_qk_l2norm=True)
    assert torch.equal(s0, committed) and s1.data_ptr() != s0.data_ptr()
    assert torch.equal(o_peek, o1)
    rest = slice(32, 64)
    o2, s2 = chunk_gated_delta_rule(q[:, rest], k[:, rest], v[:, rest], g[:, rest],
                                    beta[:, rest], s1, True, use_qk_l2norm=True)
    assert rms_rel(torch.cat([o1, o2], dim=1), o_full) < 1e-5 and rms_rel(s2, s_full) < 1e-5


def test_triton_bf16_inputs_keep_dtype_and_fp32_state(rms_rel):
    from clover_cli.kernels.gated_delta.triton_kernel import chunk_gated_delta_rule_triton
    x = _inputs(1, 17, 1, 1, 16, 16, seed=8, dtype=torch.bfloat16)
    o, s = recurrent_gated_delta_rule(*x, output_final_state=True, use_qk_l2norm=True)
    to, ts = chunk_gated_delta_rule_triton(*x, output_final_state=True, use_qk_l2norm=True)
    assert to.dtype == torch.bfloat16 and ts.dtype == torch.float32
    assert rms_rel(to, o) < 2e-2 and rms_rel(ts, s) < 1e-5


def test_bad_arguments_raise_clear_errors():
    q, k, v, g, beta, s0 = _inputs(1, 4, 1, 2, 8, 8, seed=0)
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=12)
    with pytest.raises(ValueError, match="initial_state"):
        chunk_gated_delta_rule(q, k, v, g, beta, initial_state=s0[:, :1])
    with pytest.raises(ValueError, match="bad shapes"):
        chunk_gated_delta_rule(q, k, v, g[..., :1], beta)
