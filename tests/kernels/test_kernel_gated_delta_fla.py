"""flash-linear-attention's own reference gated delta rule as an independent oracle: its naive
recurrent and naive chunked forms (fla/ops/gated_delta_rule/naive.py in `fla-core`, the ops half of
flash-linear-attention) against our recurrent reference, our chunked reference and our Triton
kernel (interpreted on this CPU).

scripts/setup-dev.sh installs fla-core==0.6.0 and einops==0.8.2 into `.venv/oracles`, a folder off
sys.path, and this module runs naive.py from there by its file. Not into the venv itself: wherever
`fla` can be imported, transformers' Qwen3-Next / Qwen3.5 layers import it when their module loads
(`use_kernel_func_from_hub_with_fallback`, even on a CPU) and run fla's Triton kernels instead of
their torch path, which would change the oracle of the hybrid conformance tests and cost 6.8 s at
that import here. Importing the `fla` package also imports every Triton kernel of `fla.ops` (11.6 s
here with TRITON_INTERPRET=1, on top of torch's 5.1 s, `python -X importtime`); naive.py needs
only torch and einops.

fla's naive forms take as many key as value heads, so grouped queries/keys are repeated per value
head for it (head h reads key head h // (Hv // Hk), the convention our kernels document); they
have no L2 norm, so keys are given unit length here and the kernels run with use_qk_l2norm=False.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from clover_cli.kernels.gated_delta import chunk_gated_delta_rule_reference, recurrent_gated_delta_rule


ORACLES = Path(sys.prefix) / "oracles"  # scripts/setup-dev.sh installs fla-core here


def _fla_naive():
    """fla's reference module, executed from its file; einops comes from the same folder."""
    path = ORACLES / "fla" / "ops" / "gated_delta_rule" / "naive.py"
    if not path.is_file():
        pytest.fail(f"{path} is missing: bash scripts/setup-dev.sh installs fla-core there")
    sys.path.insert(0, str(ORACLES))
    try:
        spec = importlib.util.spec_from_file_location("fla_gated_delta_naive", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ORACLES))
    assert "fla" not in sys.modules  # transformers must not find fla through us
    return module


@pytest.fixture(scope="module")
def fla():
    return _fla_naive()


def _inputs(B, T, Hk, Hv, Dk, Dv, seed, with_state):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, Hk, Dk, generator=gen)
    k = torch.nn.functional.normalize(torch.randn(B, T, Hk, Dk, generator=gen), dim=-1)
    v = torch.randn(B, T, Hv, Dv, generator=gen)
    g = -torch.rand(B, T, Hv, generator=gen) * 0.5  # log decay <= 0
    beta = torch.rand(B, T, Hv, generator=gen)
    state = torch.randn(B, Hv, Dk, Dv, generator=gen) if with_state else None
    return q, k, v, g, beta, state


def _per_value_head(x, Hv):
    """[B, T, Hk, D] -> [B, T, Hv, D]: each value head's own copy of its key head."""
    return x.repeat_interleave(Hv // x.shape[2], dim=2)


CASES = [  # B, T, Hk, Hv, Dk, Dv, chunk, with_state
    pytest.param(1, 21, 2, 2, 16, 8, 16, True, id="T21-C16-state"),
    pytest.param(2, 40, 1, 2, 16, 16, 8, True, id="T40-C8-grouped2-state"),
    pytest.param(1, 33, 2, 2, 8, 12, 32, False, id="T33-C32-Dk8-Dv12-nostate"),
]


@pytest.mark.parametrize("B,T,Hk,Hv,Dk,Dv,chunk,with_state", CASES)
def test_our_references_match_fla_s_naive_forms(fla, B, T, Hk, Hv, Dk, Dv, chunk, with_state, rms_rel):
    q, k, v, g, beta, s0 = _inputs(B, T, Hk, Hv, Dk, Dv, seed=T, with_state=with_state)
    fq, fk = _per_value_head(q, Hv), _per_value_head(k, Hv)
    fo, fs = fla.naive_recurrent_gated_delta_rule(fq, fk, v, beta=beta, g=g, initial_state=s0,
                                                  output_final_state=True)
    co, cs = fla.naive_chunk_gated_delta_rule(fq, fk, v, g=g, beta=beta, chunk_size=chunk,
                                              initial_state=s0, output_final_state=True)
    assert rms_rel(co, fo) < 1e-5 and rms_rel(cs, fs) < 1e-5  # fla's two forms agree
    o, s = recurrent_gated_delta_rule(q, k, v, g, beta, s0, True)
    assert rms_rel(o, fo) < 1e-6 and rms_rel(s, fs) < 1e-6
    o, s = chunk_gated_delta_rule_reference(q, k, v, g, beta, s0, True, chunk_size=chunk)
    assert rms_rel(o, co) < 1e-5 and rms_rel(s, cs) < 1e-5


@pytest.mark.parametrize("B,T,Hk,Hv,Dk,Dv,chunk,with_state", CASES)
def test_our_triton_kernel_matches_fla_s_naive_chunked_form(fla, B, T, Hk, Hv, Dk, Dv, chunk, with_state,
                                                            rms_rel):
    from clover_cli.kernels.gated_delta.triton_kernel import chunk_gated_delta_rule_triton

    q, k, v, g, beta, s0 = _inputs(B, T, Hk, Hv, Dk, Dv, seed=T + 1, with_state=with_state)
    fo, fs = fla.naive_chunk_gated_delta_rule(_per_value_head(q, Hv), _per_value_head(k, Hv), v, g=g,
                                              beta=beta, chunk_size=chunk, initial_state=s0,
                                              output_final_state=True)
    to, ts = chunk_gated_delta_rule_triton(q, k, v, g, beta, s0, True, chunk_size=chunk)
    assert to.shape == fo.shape and ts.dtype == torch.float32
    assert rms_rel(to, fo) < 1e-5 and rms_rel(ts, fs) < 1e-5
