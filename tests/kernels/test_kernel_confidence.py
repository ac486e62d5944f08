"""select_commits: the Triton kernel (interpreted) against the reference, and the decoding rule."""
import math
import sys

import pytest
import torch

from clover_cli.kernels.confidence import commit_mask, select_commits, select_commits_reference


def _triton(logits, masked, threshold, mask_token_id=None):
    from clover_cli.kernels.confidence.triton_kernel import select_commits_triton
    return select_commits_triton(logits, masked, threshold, mask_token_id)


IMPLS = [pytest.param(select_commits_reference, id="reference"),
         pytest.param(_triton, id="triton")]


@pytest.mark.parametrize("B,L,V,dtype,mask_id", [
    pytest.param(1, 1, 50, torch.float32, None, id="B1-L1-V50-fp32"),
    pytest.param(2, 31, 301, torch.float32, 7, id="B2-L31-V301-fp32-maskid"),
    pytest.param(1, 32, 1000, torch.float16, 999, id="B1-L32-V1000-fp16-maskid-last"),
    pytest.param(3, 5, 777, torch.bfloat16, 0, id="B3-L5-V777-bf16-maskid-first"),
])
def test_triton_matches_reference(B, L, V, dtype, mask_id):
    gen = torch.Generator().manual_seed(B * 1000 + L)
    logits = (torch.randn(B, L, V, generator=gen) * 4).to(dtype)  # [B, L, V]
    masked = torch.rand(B, L, generator=gen) > 0.3
    tok, conf, commit = _triton(logits, masked, 0.3, mask_id)
    r_tok, r_conf, _ = select_commits_reference(logits, masked, 0.3, mask_token_id=mask_id)
    assert tok.dtype == torch.long and conf.dtype == torch.float32 and commit.dtype == torch.bool
    assert torch.equal(tok, r_tok)
    assert torch.allclose(conf, r_conf, rtol=1e-5, atol=1e-7)
    assert torch.equal(commit, commit_mask(conf, masked, 0.3))


def _naive_select(logits, masked, threshold, mask_id):
    """Row by row in Python floats: softmax without the mask token, argmax, threshold, fallback."""
    B, L, V = logits.shape
    tokens, confs, commits = [], [], []
    for b in range(B):
        row_tok, row_conf = [], []
        for i in range(L):
            xs = [float(x) for x in logits[b, i]]
            vocab = [j for j in range(V) if j != mask_id]
            top = max(xs[j] for j in vocab)
            total = sum(math.exp(xs[j] - top) for j in vocab)
            best = next(j for j in vocab if xs[j] == top)
            row_tok.append(best)
            row_conf.append(1.0 / total)
        passed = [bool(masked[b, i]) and row_conf[i] > threshold for i in range(L)]
        if not any(passed) and bool(masked[b].any()):
            pick = max((i for i in range(L) if masked[b, i]), key=lambda i: (row_conf[i], -i))
            passed[pick] = True
        tokens.append(row_tok)
        confs.append(row_conf)
        commits.append(passed)
    return tokens, confs, commits


def test_reference_matches_naive_loop():
    gen = torch.Generator().manual_seed(21)
    logits = torch.randn(3, 9, 40, generator=gen) * 2
    logits[0, 3, 5] = 30.0  # the mask token's logit is the largest here
    masked = torch.rand(3, 9, generator=gen) > 0.4
    masked[2] = False
    tok, conf, commit = select_commits_reference(logits, masked, 0.2, mask_token_id=5)
    n_tok, n_conf, n_commit = _naive_select(logits, masked, 0.2, 5)
    assert tok.tolist() == n_tok
    assert torch.allclose(conf, torch.tensor(n_conf), atol=1e-6)
    decided = [b for b in range(3) if _decided(n_conf[b], masked[b].tolist(), 0.2)]
    assert {0, 1} <= set(decided)  # this seed's masked confidences are >= 2e-3 from 0.2 (row 2: none)
    assert [commit[b].tolist() for b in decided] == [n_commit[b] for b in decided]


def _decided(confs: list[float], masked: list[bool], threshold: float, margin: float = 1e-5) -> bool:
    """Whether a row's commits cannot depend on the last bits of a softmax (another CPU's SIMD
    exp): no masked confidence within `margin` of the threshold, nor of the runner-up when the
    most confident position is the fallback."""
    mine = sorted((c for c, m in zip(confs, masked) if m), reverse=True)
    if any(abs(c - threshold) <= margin for c in mine):
        return False
    return not (mine and mine[0] <= threshold and len(mine) > 1 and mine[0] - mine[1] <= margin)


def test_triton_reads_a_strided_slice_of_logits():
    gen = torch.Generator().manual_seed(3)
    full = torch.randn(2, 40, 130, generator=gen) * 3  # [B, T, V]: the block is the last 32 rows
    block = full[:, -32:]
    masked = torch.ones(2, 32, dtype=torch.bool)
    tok, conf, _ = _triton(block, masked, 0.9)
    r_tok, r_conf, _ = select_commits_reference(block.contiguous(), masked, 0.9)
    assert torch.equal(tok, r_tok) and torch.allclose(conf, r_conf, rtol=1e-5)


def _peaked(rows: list[float], V: int = 8) -> torch.Tensor:
    """Logits [1, L, V] whose max softmax probability at row i is rows[i] (token i % V)."""
    L = len(rows)
    logits = torch.zeros(1, L, V)
    for i, p in enumerate(rows):
        # p = e^x / (e^x + V - 1)  =>  x = log(p (V - 1) / (1 - p))
        logits[0, i, i % V] = torch.log(torch.tensor(p * (V - 1) / (1 - p)))
    return logits


@pytest.mark.parametrize("impl", IMPLS)
def test_nothing_above_threshold_commits_exactly_the_most_confident(impl):
    logits = _peaked([0.3, 0.6, 0.8, 0.5])
    masked = torch.tensor([[True, True, False, True]])  # position 2 is already committed
    tok, conf, commit = impl(logits, masked, 0.95)
    assert commit.tolist() == [[False, True, False, False]]
    assert tok.tolist() == [[0, 1, 2, 3]]
    assert conf[0].tolist() == pytest.approx([0.3, 0.6, 0.8, 0.5], abs=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
def test_all_above_threshold_all_masked_commit(impl):
    logits = _peaked([0.99, 0.999, 0.97, 0.98, 0.995])
    masked = torch.tensor([[True, True, True, False, True]])
    _, _, commit = impl(logits, masked, 0.95)
    assert commit.tolist() == [[True, True, True, False, True]]


@pytest.mark.parametrize("impl", IMPLS)
def test_equal_to_threshold_does_not_commit(impl):
    logits = torch.zeros(1, 3, 2)  # two equal logits: confidence exactly 0.5
    logits[0, 2, 1] = 3.0  # confidence ~0.95 at position 2
    masked = torch.ones(1, 3, dtype=torch.bool)
    _, conf, commit = impl(logits, masked, 0.5)
    assert conf[0, 0].item() == 0.5 and conf[0, 1].item() == 0.5
    assert commit.tolist() == [[False, False, True]]


@pytest.mark.parametrize("impl", IMPLS)
def test_fallback_tie_goes_to_the_first_masked_position(impl):
    logits = torch.zeros(1, 4, 2)  # every confidence is exactly 0.5
    masked = torch.tensor([[False, True, True, True]])
    _, _, commit = impl(logits, masked, 0.5)
    assert commit.tolist() == [[False, True, False, False]]


@pytest.mark.parametrize("impl", IMPLS)
def test_mask_token_is_never_chosen(impl):
    logits = torch.zeros(2, 3, 6)
    logits[..., 5] = 50.0  # the mask token has by far the largest logit
    logits[..., 2] = 1.0
    masked = torch.ones(2, 3, dtype=torch.bool)
    tok, conf, _ = impl(logits, masked, 0.9, mask_token_id=5)
    assert (tok == 2).all()
    expected = torch.softmax(torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]), 0)[2].item()
    assert torch.allclose(conf, torch.full_like(conf, expected), atol=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_rows_without_masks_commit_nothing(impl):
    logits = _peaked([0.2, 0.3, 0.4, 0.99]).repeat(2, 1, 1)
    masked = torch.tensor([[False] * 4, [True, True, False, False]])
    _, _, commit = impl(logits, masked, 0.95)
    assert commit.tolist() == [[False] * 4, [False, True, False, False]]


def test_sampling_uses_the_tempered_distribution_and_never_the_mask():
    gen = torch.Generator().manual_seed(0)
    logits = torch.tensor([[[2.0, 1.0, 0.0, 9.0]]]).repeat(1, 32, 1)  # [1, 32, 4], mask id 3
    masked = torch.ones(1, 32, dtype=torch.bool)
    tok, conf, commit = select_commits(logits, masked, 0.95, temperature=2.0, mask_token_id=3,
                                       generator=gen)
    probs = torch.softmax(torch.tensor([2.0, 1.0, 0.0]) / 2.0, 0)
    # the draw of a generator seeded the same, from the tempered distribution without the mask
    tempered = torch.softmax(logits.masked_fill(torch.arange(4) == 3, float("-inf")) / 2.0, -1)
    drawn = torch.multinomial(tempered[0], 1, generator=torch.Generator().manual_seed(0))[:, 0]
    assert torch.equal(tok[0], drawn) and len(set(drawn.tolist())) > 1
    assert torch.allclose(conf, probs[tok], atol=1e-6)
    assert commit.sum().item() == 1  # no sampled probability reaches 0.95
    again = select_commits(logits, masked, 0.95, temperature=2.0, mask_token_id=3,
                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(again[0], tok)


def test_tiny_top_p_keeps_only_the_argmax():
    logits = torch.tensor([[[2.0, 1.0, 0.5, 0.0]]])
    tok, conf, _ = select_commits(logits, torch.ones(1, 1, dtype=torch.bool), 0.5,
                                  temperature=1.0, top_p=0.1,
                                  generator=torch.Generator().manual_seed(1))
    assert tok.item() == 0 and conf.item() == pytest.approx(1.0)


def test_dispatch_runs_triton_when_forced(force_triton):
    sys.modules.pop("clover_cli.kernels.confidence.triton_kernel", None)
    logits = _peaked([0.3, 0.99])
    _, _, commit = select_commits(logits, torch.ones(1, 2, dtype=torch.bool), 0.95)
    assert commit.tolist() == [[False, True]]
    assert "clover_cli.kernels.confidence.triton_kernel" in sys.modules


def test_cpu_dispatch_uses_the_reference(monkeypatch):
    monkeypatch.delenv("CLOVER_FORCE_TRITON", raising=False)
    sys.modules.pop("clover_cli.kernels.confidence.triton_kernel", None)
    select_commits(_peaked([0.5]), torch.ones(1, 1, dtype=torch.bool), 0.95)
    assert "clover_cli.kernels.confidence.triton_kernel" not in sys.modules


def test_bad_shapes_raise_a_clear_error():
    with pytest.raises(ValueError, match="logits"):
        select_commits(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), 0.9)
