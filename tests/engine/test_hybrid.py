"""The Clover-shaped GDN hybrid (Qwen3-Next-shaped, MoE) as a block-diffusion model.

Attention layers see the block bidirectionally and the past causally; Gated DeltaNet layers are
causal and carry history as recurrent + conv state that only a commit forward may change.
"""
from __future__ import annotations

import json

import pytest
import torch

from clover_cli.engine.block_decode import BlockDecoder
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from clover_cli.engine.runtime import make_cache, snapshot_recurrent
from clover_cli.engine.settings import BlockSettings
from oracle import oracle_decode
from steer import Steer, stop_ids


@pytest.fixture(scope="module")
def hybrid(tiny_dirs):
    return load_model(str(tiny_dirs["hybrid"]), dtype="float64")


def _prompt(n: int) -> list[int]:
    return torch.randint(10, 250, (n,), generator=torch.Generator().manual_seed(n)).tolist()


def test_hybrid_is_recognised(hybrid):
    assert hybrid.family.name == "hybrid" and hybrid.family.recurrent
    assert hybrid.block_size == 8 and hybrid.model.config.num_experts == 4
    assert Engine(hybrid).fuse_commit  # GDN layers split the fused input (recurrent_split.py)


@pytest.mark.parametrize("threshold", [0.95, 0.3], ids=["t0.95", "t0.30"])
@pytest.mark.parametrize("n", [13, 16, 5])
def test_hybrid_cached_equals_full_recompute(hybrid, threshold, n):
    prompt = _prompt(n)
    result = Engine(hybrid).generate(prompt, GenerationConfig(max_new_tokens=26, threshold=threshold))
    expected, steps = oracle_decode(hybrid, prompt, 26, threshold, hybrid.block_size)
    assert list(result.token_ids) == expected
    assert list(result.stats.steps_per_block) == steps


def _state(cache) -> list[torch.Tensor]:
    tensors = []
    for layer in cache.layers:
        for d in (getattr(layer, "conv_states", {}), getattr(layer, "recurrent_states", {})):
            tensors += [t.clone() for t in d.values() if t is not None]
        if getattr(layer, "keys", None) is not None:
            tensors += [layer.keys.clone(), layer.values.clone()]
    return tensors


def test_denoise_steps_leave_committed_state_bitwise_unchanged(hybrid):
    prompt = _prompt(19)  # 2 whole blocks prefilled, tail of 3 in the decode block
    dec = BlockDecoder(hybrid, prompt, GenerationConfig(max_new_tokens=8))
    cache = make_cache(hybrid.model)
    dec._prefill(cache, 16)
    before = _state(cache)
    assert any(t.abs().sum() > 0 for t in before)
    saved = snapshot_recurrent(cache)
    block = torch.full((8,), hybrid.mask_token_id)
    block[:3] = torch.tensor(prompt[16:])
    for step in range(5):
        block[3 + step] = 40 + step  # the block changes between steps, as it does while decoding
        dec._denoise(block, 16, cache, saved)
        after = _state(cache)
        assert len(after) == len(before)
        assert all(torch.equal(a, b) for a, b in zip(before, after))
    dec._commit(block, 16, cache, with_next=False)
    assert not all(torch.equal(a, b) for a, b in zip(before, _state(cache)))


# a prompt inside a block (13) and on its end (16); in AR mode (blocks of 1) every prompt ends on
# a block, so one length shows it (each AR case is 2 x 26 forwards)
@pytest.mark.parametrize("n,block_size", [(13, None), (16, None), (13, 1)],
                         ids=["13-blocks", "16-blocks", "13-ar_mode"])
def test_hybrid_fused_commit_equals_separate_forward(hybrid, n, block_size):
    prompt = _prompt(n)
    cfg = GenerationConfig(max_new_tokens=26, threshold=0.5, block_size=block_size)
    fused = BlockDecoder(hybrid, prompt, cfg, fuse_commit=True)
    separate = BlockDecoder(hybrid, prompt, cfg, fuse_commit=False)
    assert fused.fuse and not separate.fuse
    with Steer(hybrid.model, stop_ids(hybrid)):  # only the budget ends the run (steer.py)
        a, b = list(fused.run())[-1], list(separate.run())[-1]
    assert a.token_ids == b.token_ids and len(a.token_ids) == 26
    assert a.stats.steps_per_block == b.stats.steps_per_block
    # fusing saves exactly one forward per block boundary crossed
    assert b.stats.forwards - a.stats.forwards == a.stats.blocks - 1 > 0


def test_qwen3_5_dense_hybrid_fuses_exactly(tmp_path_factory):
    """The split also holds for transformers' Qwen3.5 GDN layers (a dense Qwen3.5 text hybrid)."""
    from tiny_checkpoints import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path_factory.mktemp("q35") / "m", "hybrid_dense", block_size=8,
                                 logit_scale=12.0)
    lm = load_model(str(path), dtype="float64")
    assert lm.family.recurrent and type(lm.model).__name__ == "Qwen3_5ForCausalLM"
    prompt = _prompt(13)
    cfg = GenerationConfig(max_new_tokens=26, threshold=0.5)
    with Steer(lm.model, stop_ids(lm)):  # only the budget ends the run (steer.py): 4 blocks
        fused = Engine(lm, fuse_commit=True).generate(prompt, cfg)
        separate = Engine(lm, fuse_commit=False).generate(prompt, cfg)
        expected, _ = oracle_decode(lm, prompt, 26, 0.5, lm.block_size)
    assert fused.token_ids == separate.token_ids
    assert separate.stats.forwards - fused.stats.forwards == fused.stats.blocks - 1 == 3
    assert list(fused.token_ids) == expected


def test_fused_commit_keeps_only_the_block_in_gdn_state(hybrid):
    """After a fused commit the recurrent/conv state is a plain commit's (to float64 rounding)."""
    prompt = _prompt(16)
    block = torch.tensor(_prompt(8)) % 200 + 20
    states = []
    for fuse in (False, True):
        dec = BlockDecoder(hybrid, prompt, GenerationConfig(max_new_tokens=16), fuse_commit=fuse)
        cache = make_cache(hybrid.model)
        dec._prefill(cache, 16)
        dec._commit(block, 16, cache, with_next=fuse)
        states.append(_state(cache))
    assert len(states[0]) == len(states[1]) > 0
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(*states))


def test_hybrid_chunked_prefill_equals_one_shot(hybrid):
    prompt = _prompt(70)
    one = Engine(hybrid).generate(prompt, GenerationConfig(
        max_new_tokens=12, family=BlockSettings(prefill_chunk_blocks=64)))
    chunked = Engine(hybrid).generate(prompt, GenerationConfig(
        max_new_tokens=12, family=BlockSettings(prefill_chunk_blocks=1)))
    assert one.token_ids == chunked.token_ids


def test_generate_and_bench_cli_on_a_hybrid(tiny_dirs, tmp_path, clover):
    """In-process (the `clover` fixture, tests/engine/conftest.py)."""
    out = clover("generate", "--model", str(tiny_dirs["hybrid"]), "--raw", "--json", "--prompt",
                  "def f(x):", "--max-new-tokens", "10")
    assert out.exit_code == 0, out.stderr
    assert len(json.loads(out.stdout)["token_ids"]) == 10
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"code": ["def f(x):\n"], "agent": []}))
    out = clover("bench", "--model", str(tiny_dirs["hybrid"]), "--prompts", str(prompts),
                  "--thresholds", "0.9", "--max-new-tokens", "8", "--json")
    assert out.exit_code == 0, out.stderr
    report = json.loads(out.stdout)
    # AR mode of a hybrid: one forward per token (the commit is fused with the next step)
    assert report["runs"][0]["tpf"] >= 1.0 and report["ar"]["tpf"] == pytest.approx(1.0)
