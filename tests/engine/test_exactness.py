"""docs/engine.md, exactness test 1 and 5: the cached engine equals an uncached full recompute."""
from __future__ import annotations

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import DenoiseStep
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import BlockSettings
from oracle import oracle_decode
from steer import Steer, stop_ids

PROMPTS = {"aligned": 16, "tail": 13, "short": 3, "one-block": 8}


@pytest.fixture(scope="module")
def models(tiny_dirs):
    return {k: load_model(str(d), dtype="float64") for k, d in tiny_dirs.items()
            if k in ("clover", "fast_dllm_v2", "sdar")}


def _prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed + n)
    return torch.randint(10, 250, (n,), generator=g).tolist()


@pytest.mark.parametrize("family", ["clover", "fast_dllm_v2", "sdar"])
@pytest.mark.parametrize("threshold", [0.95, 0.3], ids=["t0.95", "t0.30"])
@pytest.mark.parametrize("prompt_kind", list(PROMPTS))
def test_cached_equals_full_recompute(models, family, threshold, prompt_kind):
    lm = models[family]
    prompt = _prompt(PROMPTS[prompt_kind])
    cfg = GenerationConfig(max_new_tokens=27, threshold=threshold)
    result = Engine(lm).generate(prompt, cfg)
    expected, expected_steps = oracle_decode(lm, prompt, 27, threshold, lm.block_size)
    assert list(result.token_ids) == expected
    assert list(result.stats.steps_per_block) == expected_steps


def test_low_threshold_commits_several_per_step(models):
    """The test would be vacuous if every step committed one token: by construction (steer.py,
    the logits the oracle reads too) three positions in four are sure, so each block's first
    step commits at least 6 of its 8 and a block takes at most 3 forwards: 40 tokens over 6
    blocks in at most 18 forwards (tpf >= 2.2); only the budget ends the run."""
    lm = models["clover"]
    prompt = _prompt(13)
    sure = {p: 20 + p for p in range(len(prompt), len(prompt) + 48) if p % 4}
    with Steer(lm.model, stop_ids(lm), sure):
        result = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=40, threshold=0.3))
        expected, steps = oracle_decode(lm, prompt, 40, 0.3, lm.block_size)
    assert list(result.token_ids) == expected and list(result.stats.steps_per_block) == steps
    assert result.finish_reason == "length" and result.stats.tpf > 1.5, result.stats


@pytest.mark.parametrize("family", ["clover", "fast_dllm_v2"])
def test_fused_commit_equals_separate_forward(models, family):
    lm = models[family]
    prompt = _prompt(11)
    cfg = GenerationConfig(max_new_tokens=30, threshold=0.5)
    fused = Engine(lm, fuse_commit=True).generate(prompt, cfg)
    separate = Engine(lm, fuse_commit=False).generate(prompt, cfg)
    assert fused.token_ids == separate.token_ids
    assert fused.stats.steps_per_block == separate.stats.steps_per_block
    if lm.family.first_token_rule:
        # Fast-dLLM v2's next block opens with the commit forward's argmax, so the commit cannot
        # carry the next block's first step: the engine runs them apart (docs/engine.md)
        assert separate.stats.forwards == fused.stats.forwards
    else:  # fusing saves exactly one forward per block boundary crossed
        assert separate.stats.forwards - fused.stats.forwards == fused.stats.blocks - 1


@pytest.mark.parametrize("family", ["clover", "fast_dllm_v2"])
def test_chunked_prefill_equals_one_shot(models, family):
    lm = models[family]
    prompt = _prompt(70, seed=3)  # 8 whole blocks of 8 + a tail of 6
    one_shot = Engine(lm).generate(prompt, GenerationConfig(
        max_new_tokens=20, family=BlockSettings(prefill_chunk_blocks=64)))
    chunked = Engine(lm).generate(prompt, GenerationConfig(
        max_new_tokens=20, family=BlockSettings(prefill_chunk_blocks=1)))
    assert one_shot.token_ids == chunked.token_ids
    assert one_shot.stats.steps_per_block == chunked.stats.steps_per_block


def test_committed_tokens_never_change_and_steps_bounded(models):
    lm = models["clover"]
    prompt = _prompt(13)
    seen: dict[tuple[int, int], int] = {}
    steps = []
    for ev in Engine(lm).stream(prompt, GenerationConfig(max_new_tokens=40, threshold=0.9)):
        if isinstance(ev, DenoiseStep):
            steps.append(ev)
            for j, (tok, m) in enumerate(zip(ev.token_ids, ev.masked)):
                if not m:
                    assert seen.setdefault((ev.block_index, j), tok) == tok
            assert ev.committed_now >= 1
    per_block = {}
    for ev in steps:
        per_block[ev.block_index] = ev.step
    assert all(1 <= s <= lm.block_size for s in per_block.values())


def test_every_forward_gets_the_mask_of_its_own_positions(models, monkeypatch):
    """The decoder reuses one positions tensor and 4-D mask across a block's denoise steps; each
    forward's mask must still be exactly the block-causal mask of its queries over the cache it
    runs against (a stale mask after a commit would show here), and denoise steps must reuse it."""
    from clover_cli.engine import runtime
    from clover_cli.engine.runtime import block_causal_mask

    lm = models["clover"]
    seen = []
    original = runtime.ForwardRunner.__call__

    def spy(self, input_ids, position_ids, cache, attention_mask, logits_to_keep=0, count=True,
            is_causal=None):
        seen.append((position_ids.clone(), cache.get_seq_length(), attention_mask))
        return original(self, input_ids, position_ids, cache, attention_mask, logits_to_keep, count,
                        is_causal)

    monkeypatch.setattr(runtime.ForwardRunner, "__call__", spy)
    result = Engine(lm).generate(_prompt(13), GenerationConfig(max_new_tokens=30, threshold=0.95))
    assert result.stats.blocks >= 3 and len(seen) > result.stats.blocks  # several steps per block
    dtype = next(lm.model.parameters()).dtype
    for positions, cached, mask in seen:
        assert int(positions[0]) == cached  # queries start right after the cached positions
        expected = block_causal_mask(positions, cached + positions.numel(), lm.block_size, dtype)
        if mask is None:  # a one-block forward, whose mask is all zeros (test_mask_free.py)
            assert not expected.any()
        else:
            assert torch.equal(mask, expected)
    reused = sum(a[2] is b[2] for a, b in zip(seen, seen[1:]))
    assert reused >= len(seen) - 2 * result.stats.blocks  # only a commit or prefill builds a new one


@pytest.mark.parametrize("block", [1, 4, 32])
def test_decode_mask_views_equal_the_block_causal_mask(block):
    """DecodeMasks hands out views of one buffer; each equals block_causal_mask for the same
    positions, and shapes it does not cover (unaligned start, keys not ending at the queries)
    are left to block_causal_mask."""
    import torch

    from clover_cli.engine.runtime import DecodeMasks, block_causal_mask

    masks = DecodeMasks(block, 300, torch.float32, "cpu")
    for tokens in sorted({1, 2, block, 2 * block}):
        for start in range(0, 200, block):
            view = masks.get(start, tokens, start + tokens)
            positions = torch.arange(start, start + tokens)
            assert torch.equal(view, block_causal_mask(positions, start + tokens, block, torch.float32))
    if block > 1:
        assert masks.get(3, 2, 5) is None  # not at a block boundary
    assert masks.get(0, 2, 7) is None  # keys beyond the queries
    last = (300 // block) * block
    assert masks.get(last, 2 * block, last + 2 * block) is None  # past the capacity
    assert masks.get(0, 3 * block, 3 * block) is None  # a prefill chunk keeps no buffer
