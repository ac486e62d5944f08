"""block_attention: reference vs a naive loop; Triton kernel (interpreted) vs the reference."""
import math

import pytest
import torch

from clover_cli.kernels.block_attention import block_attention, block_attention_reference


def _inputs(B, Hq, Hkv, L, P, D, seed, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, L, D, generator=gen)  # [B, Hq, L, D]
    kc, vc = (torch.randn(B, Hkv, P, D, generator=gen) for _ in range(2))  # [B, Hkv, P, D]
    kb, vb = (torch.randn(B, Hkv, L, D, generator=gen) for _ in range(2))  # [B, Hkv, L, D]
    return tuple(t.to(dtype) for t in (q, kc, vc, kb, vb))


def _naive(q, kc, vc, kb, vb, scale, block_size=None):
    """One query at a time: scores over every visible cached and block key, softmax, sum."""
    B, Hq, L, D = q.shape
    group = Hq // kb.shape[1]
    out = torch.zeros(B, Hq, L, D, dtype=torch.float64)
    for b in range(B):
        for h in range(Hq):
            keys = torch.cat([kc[b, h // group], kb[b, h // group]]).double()  # [P+L, D]
            vals = torch.cat([vc[b, h // group], vb[b, h // group]]).double()
            P = kc.shape[2]
            for i in range(L):
                w = [math.exp(scale * float(q[b, h, i].double() @ key))
                     if block_size is None or j < P or (j - P) // block_size <= i // block_size
                     else 0.0 for j, key in enumerate(keys)]
                total = sum(w)
                out[b, h, i] = sum(wj / total * vj for wj, vj in zip(w, vals))
    return out


SHAPES = [  # B, Hq, Hkv, L, P, D
    pytest.param(1, 2, 2, 1, 0, 16, id="L1-P0-mha"),
    pytest.param(2, 4, 1, 31, 33, 16, id="L31-P33-gqa4"),
    pytest.param(1, 4, 2, 32, 63, 32, id="L32-P63-gqa2"),
    pytest.param(1, 2, 1, 32, 1, 24, id="L32-P1-gqa2-D24"),
    pytest.param(1, 8, 2, 7, 64, 8, id="L7-P64-gqa4-D8"),
]


@pytest.mark.parametrize("B,Hq,Hkv,L,P,D", SHAPES[:3])
def test_reference_matches_naive_loop(B, Hq, Hkv, L, P, D, rms_rel):
    x = _inputs(B, Hq, Hkv, min(L, 5), min(P, 6), D, seed=11)
    got = block_attention_reference(*x)
    want = _naive(*x, scale=D ** -0.5)
    assert rms_rel(got, want) < 1e-6


@pytest.mark.parametrize("B,Hq,Hkv,L,P,D", SHAPES)
def test_triton_matches_reference(B, Hq, Hkv, L, P, D, rms_rel):
    from clover_cli.kernels.block_attention.triton_kernel import block_attention_triton
    x = _inputs(B, Hq, Hkv, L, P, D, seed=L * 100 + P)
    got = block_attention_triton(*x)
    assert got.shape == (B, Hq, L, D) and got.dtype == torch.float32
    assert rms_rel(got, block_attention_reference(*x)) < 1e-5


@pytest.mark.parametrize("splits", [pytest.param(1, id="one-split"),
                                    pytest.param(3, id="three-splits"),
                                    pytest.param(8, id="more-splits-than-tiles")])
def test_triton_cache_splits_combine_exactly(splits, rms_rel):
    from clover_cli.kernels.block_attention.triton_kernel import block_attention_triton
    x = _inputs(2, 4, 2, 31, 47, 16, seed=splits)
    got = block_attention_triton(*x, num_splits=splits)
    assert rms_rel(got, block_attention_reference(*x)) < 1e-5


def test_triton_half_precision_and_custom_scale(rms_rel):
    from clover_cli.kernels.block_attention.triton_kernel import block_attention_triton
    x = _inputs(1, 4, 2, 32, 20, 16, seed=5, dtype=torch.float16)
    got = block_attention_triton(*x, scale=0.3)
    assert got.dtype == torch.float16
    assert rms_rel(got, block_attention_reference(*x, scale=0.3)) < 5e-3


def test_triton_reads_strided_cache_views(rms_rel, force_triton):
    q, kc, vc, kb, vb = _inputs(1, 4, 2, 32, 40, 16, seed=9)
    buf_k = torch.zeros(1, 2, 64, 16)  # a preallocated cache buffer, only 40 positions filled
    buf_v = torch.zeros(1, 2, 64, 16)
    buf_k[:, :, :40], buf_v[:, :, :40] = kc, vc
    got = block_attention(q, buf_k[:, :, :40], buf_v[:, :, :40], kb, vb)
    assert rms_rel(got, block_attention_reference(q, kc, vc, kb, vb)) < 1e-5


@pytest.mark.parametrize("forced", [pytest.param(False, id="reference"),
                                    pytest.param(True, id="triton")])
def test_block_is_bidirectional_and_cache_is_seen(forced, monkeypatch):
    if forced:
        monkeypatch.setenv("CLOVER_FORCE_TRITON", "1")
    q, kc, vc, kb, vb = _inputs(1, 2, 1, 4, 3, 16, seed=2)
    base = block_attention(q, kc, vc, kb, vb)
    vb2 = vb.clone()
    vb2[:, :, -1] += 5.0  # the last block position changes what the first query reads
    assert (block_attention(q, kc, vc, kb, vb2)[:, :, 0] - base[:, :, 0]).abs().max() > 1e-3
    vc2 = vc.clone()
    vc2[:, :, 0] += 5.0  # and so does the oldest cached position
    assert (block_attention(q, kc, vc2, kb, vb)[:, :, 0] - base[:, :, 0]).abs().max() > 1e-3


def test_mismatched_heads_raise_a_clear_error():
    q, kc, vc, kb, vb = _inputs(1, 3, 2, 4, 2, 8, seed=1)
    with pytest.raises(ValueError, match="cache"):
        block_attention(q, kc, vc, kb, vb)


@pytest.mark.parametrize("L,P,block_size", [pytest.param(20, 6, 8, id="L20-P6-bs8"),
                                            pytest.param(7, 0, 3, id="L7-P0-bs3")])
def test_block_causal_reference_matches_naive_loop(L, P, block_size, rms_rel):
    x = _inputs(1, 2, 1, L, P, 8, seed=L)
    got = block_attention_reference(*x, block_size=block_size)
    assert rms_rel(got, _naive(*x, scale=8 ** -0.5, block_size=block_size)) < 1e-6


@pytest.mark.parametrize("L,P,block_size,splits", [
    pytest.param(80, 33, 32, 2, id="L80-P33-bs32-2splits"),
    pytest.param(33, 0, 16, 1, id="L33-P0-bs16"),
])
def test_block_causal_triton_matches_reference_and_is_causal(L, P, block_size, splits, rms_rel):
    from clover_cli.kernels.block_attention.triton_kernel import block_attention_triton
    q, kc, vc, kb, vb = _inputs(1, 4, 2, L, P, 16, seed=P + 1)
    got = block_attention_triton(q, kc, vc, kb, vb, block_size=block_size, num_splits=splits)
    assert rms_rel(got, block_attention_reference(q, kc, vc, kb, vb, block_size=block_size)) < 1e-5
    first = slice(0, block_size)  # the first block alone gives the same answer: later blocks unseen
    alone = block_attention_triton(q[:, :, first], kc, vc, kb[:, :, first], vb[:, :, first])
    assert rms_rel(got[:, :, first], alone) < 1e-5


@pytest.mark.parametrize("D", [8, 24])
def test_triton_never_reads_past_the_head_dim(D, rms_rel):
    """A head dim below the tile width (BLOCK_D = 16 / 32) must not read the memory after each
    key/value row: here the inputs are views whose rows are followed by NaN, which a load that
    masks only the key index folds into every score (0 x NaN) — the nondeterministic NaN rows a
    CI run once saw on contiguous inputs, where the padding read the next row or past the end."""
    from clover_cli.kernels.block_attention.triton_kernel import block_attention_triton

    def nan_padded(t):  # same values, but each row of D is followed by D NaNs in memory
        wide = torch.full((*t.shape[:-1], 2 * D), float("nan"))
        wide[..., :D] = t
        return wide[..., :D]

    x = _inputs(1, 4, 2, 7, 40, D, seed=D)
    padded = tuple(nan_padded(t) for t in x)
    assert padded[1].stride(-1) == 1 and padded[1].stride(-2) == 2 * D  # no copy on the way in
    for splits in (1, 2):
        got = block_attention_triton(*padded, num_splits=splits)
        assert rms_rel(got, block_attention_reference(*x)) < 1e-5
