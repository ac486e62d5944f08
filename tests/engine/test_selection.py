"""docs/engine.md, exactness test 2: the commit rule of one denoise step."""
from __future__ import annotations

import torch

from clover_cli.engine.selection import select

select_reference = select


def _logits(probs_top: list[float], vocab: int = 6) -> torch.Tensor:
    """Rows whose top token (id = row index % vocab) has the given softmax probability."""
    rows = []
    for i, p in enumerate(probs_top):
        rest = (1.0 - p) / (vocab - 1)
        row = torch.full((vocab,), rest)
        row[(i + 1) % vocab] = p
        rows.append(row.log())
    return torch.stack(rows)


def test_nothing_above_threshold_commits_exactly_the_most_confident():
    logits = _logits([0.5, 0.7, 0.6, 0.4])
    masked = torch.tensor([True, True, True, True])
    tokens, conf, commit = select(logits, masked, 0.95)
    assert commit.tolist() == [False, True, False, False]
    assert tokens[1].item() == 2
    assert abs(conf[1].item() - 0.7) < 1e-5


def test_all_above_threshold_all_commit():
    logits = _logits([0.99, 0.98, 0.97])
    _, _, commit = select(logits, torch.tensor([True, True, True]), 0.95)
    assert commit.tolist() == [True, True, True]


def test_threshold_is_strict():
    logits = _logits([0.5, 0.5])  # exactly at the threshold: not above it
    _, conf, commit = select(logits, torch.tensor([True, True]), 0.5)
    assert abs(conf[0].item() - 0.5) < 1e-6
    assert int(commit.sum()) == 1  # only the top-1 fallback


def test_unmasked_positions_never_commit():
    logits = _logits([0.99, 0.99, 0.3])
    _, _, commit = select(logits, torch.tensor([False, True, True]), 0.95)
    assert commit.tolist() == [False, True, False]
    _, _, none = select(logits, torch.tensor([False, False, False]), 0.95)
    assert not none.any()


def test_fallback_only_among_masked_positions():
    logits = _logits([0.9, 0.2, 0.3])
    _, _, commit = select(logits, torch.tensor([False, True, True]), 0.95)
    assert commit.tolist() == [False, False, True]


def test_mask_token_is_never_predicted():
    logits = torch.zeros(2, 5)
    logits[:, 4] = 50.0  # the mask token dominates
    logits[:, 1] = 3.0
    tokens, conf, _ = select(logits, torch.tensor([True, True]), 0.95, mask_token_id=4)
    assert tokens.tolist() == [1, 1]
    assert conf[0] < 0.95  # confidence is computed with the mask logit excluded


def test_sampling_is_seeded_and_reports_the_sampled_probability():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(1))
    masked = torch.ones(4, dtype=torch.bool)
    a = select_reference(logits, masked, 0.9, temperature=1.0, generator=torch.Generator().manual_seed(7))
    b = select_reference(logits, masked, 0.9, temperature=1.0, generator=torch.Generator().manual_seed(7))
    assert a[0].tolist() == b[0].tolist()
    probs = torch.softmax(logits, -1)
    assert torch.allclose(a[1], probs.gather(-1, a[0][:, None]).squeeze(-1), atol=1e-6)


def test_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    nucleus = torch.softmax(logits, -1) * torch.tensor([1.0, 1.0, 0.0, 0.0])
    nucleus = nucleus / nucleus.sum(-1, keepdim=True)  # the two kept, renormalised
    seen = set()
    for seed in range(40):
        tok, _, _ = select_reference(logits, torch.tensor([True]), 0.9, temperature=1.0, top_p=0.8,
                                     generator=torch.Generator().manual_seed(seed))
        # the draw of a generator seeded the same from the nucleus alone
        drawn = int(torch.multinomial(nucleus, 1, generator=torch.Generator().manual_seed(seed)))
        assert int(tok[0]) == drawn, seed
        seen.add(drawn)
    assert seen == {0, 1}  # the draws reach both kept tokens, so both are checked


def test_cpu_greedy_fast_path_matches_the_kernel_reference():
    """engine.selection's CPU greedy path (fewer ops) decides exactly like the contract's
    reference op: same tokens, same commits, confidences equal to rounding."""
    from clover_cli.kernels.confidence import select_commits_reference

    gen = torch.Generator().manual_seed(0)
    for trial in range(240):
        n, vocab = 32, (50 if trial < 200 else 4096)  # also the bundled model's vocabulary size
        scale = [0.5, 3.0, 8.0, 20.0][trial % 4]
        logits = torch.randn(n, vocab, generator=gen) * scale
        if trial % 7 == 0:
            logits[:, 5] = logits.max() + 1.0  # the mask token would win if not excluded
        masked = torch.rand(n, generator=gen) < [0.1, 0.5, 1.0][trial % 3]
        if not masked.any():
            masked[trial % n] = True
        for threshold in (0.95, 0.5, 0.3):
            tok, conf, commit = select(logits, masked, threshold, 0.0, 5)
            rt, rc, rm = select_commits_reference(logits[None], masked[None], threshold,
                                                  mask_token_id=5)
            assert torch.equal(commit, rm[0]), (trial, threshold)
            assert torch.equal(tok[masked], rt[0][masked])
            assert torch.allclose(conf[masked], rc[0][masked], atol=1e-6)
            assert not commit[~masked].any()
