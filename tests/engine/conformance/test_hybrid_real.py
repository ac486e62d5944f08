"""The Gated DeltaNet hybrids on the released layout of Qwen3.5-MoE and
Qwen3-Next (tests/engine/conformance/hybrid_real.py builds them from transformers' defaults).

- AR: a checkpoint without mask_token_id decodes through the engine's AR path, id for id as
  transformers' own greedy `generate`.
- Block mode: id for id (and step for step) as an uncached recompute reference written here
  (`recompute_generate`), at block sizes 4 / 8 / 32 and thresholds 0.95 / 0.5.
- GDN state: denoise steps leave it bitwise unchanged, a commit changes it, a fused commit keeps
  only the block in it; a warm request from the prefix cache (restoring a state snapshot at an
  earlier block boundary) gives the cold request's ids and reuses the expected positions.
"""
from __future__ import annotations

import json
import shutil
from contextlib import nullcontext

import pytest
import torch

from clover_cli.engine.block_decode import BlockDecoder
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine, configure_cpu_threads
from clover_cli.engine.families import detect_family
from clover_cli.engine.loader import load_model
from clover_cli.engine.runtime import make_cache, snapshot_recurrent
from hybrid_real import (EOS_ID, KINDS, MASK_ID, SCALED, SHAPE_KEYS, build, build_released_layout,
                         default_config, recompute_generate, tiny_config)
from steer import Steer, stop_ids

DTYPE = "float64"  # rounding out of the way: equal ids mean equal algorithms


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """kind -> (diffusion checkpoint dir, AR checkpoint dir: the same weights, no mask/block)."""
    out = {}
    for kind in KINDS:
        root = tmp_path_factory.mktemp(kind)
        diffusion = build(kind, root / "diffusion", block_size=32)
        ar = root / "ar"
        shutil.copytree(diffusion, ar)
        cfg = json.loads((ar / "config.json").read_text())
        del cfg["mask_token_id"], cfg["block_size"]
        (ar / "config.json").write_text(json.dumps(cfg, indent=2))
        out[kind] = (diffusion, ar)
    return out


@pytest.fixture(scope="module")
def models(dirs):
    cache = {}

    def get(kind: str, ar: bool = False):
        if (kind, ar) not in cache:
            cache[kind, ar] = load_model(str(dirs[kind][1 if ar else 0]), dtype=DTYPE)
            # one thread, as the engine runs a small model (and the reference with it: torch's
            # float64 depthwise conv, the GDN layers' conv, is many times slower on two)
            configure_cpu_threads(cache[kind, ar].model)
        return cache[kind, ar]

    return get


def _prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(1000 * seed + n)
    return torch.randint(20, 4000, (n,), generator=g).tolist()


@pytest.mark.parametrize("kind", KINDS)
def test_tiny_configs_keep_the_released_layout(kind):
    """Only SCALED sizes differ from transformers' defaults (the released layout): the layer
    pattern is the defaults' first period, top-k and the shared expert are kept."""
    full, tiny = default_config(kind), tiny_config(kind)
    for key in SHAPE_KEYS:
        assert tiny[key] == full[key], key
    assert full["rope_parameters"]["partial_rotary_factor"] == 0.25 and full["head_dim"] == 256
    assert (full["linear_num_key_heads"], full["linear_num_value_heads"]) == (16, 32)
    assert tiny["layer_types"] == full["layer_types"][:4] == ["linear_attention"] * 3 + ["full_attention"]
    assert full["layer_types"] == tiny["layer_types"] * (full["num_hidden_layers"] // 4)
    assert tiny["num_experts"] == SCALED["num_experts"] < full["num_experts"]
    assert tiny["num_experts_per_tok"] == full["num_experts_per_tok"] in (8, 10)
    assert tiny["shared_expert_intermediate_size"] == full["shared_expert_intermediate_size"] == 512
    changed = {k for k in tiny if k in full and tiny[k] != full[k]}
    assert changed <= set(SCALED) | {"layer_types", "eos_token_id", "pad_token_id", "initializer_range"}
    fam = detect_family(tiny)
    assert (fam.name, fam.is_diffusion, fam.recurrent, fam.mask_token_id, fam.block_size) == (
        "hybrid", True, True, MASK_ID, 32)
    fam = detect_family(tiny_config(kind, block_size=None))  # a released AR checkpoint
    assert (fam.name, fam.is_diffusion, fam.recurrent) == ("ar", False, True)


@pytest.mark.parametrize("kind", KINDS)
def test_loaded_model_has_the_released_modules(models, kind):
    """Gated attention (q_proj = query + output gate), partial rotary, GDN head layout, routed
    experts with top-k and a gated shared expert, in transformers' own classes."""
    lm = models(kind)
    model = lm.model
    assert type(model).__name__ == ("Qwen3_5MoeForCausalLM" if kind == "qwen3_5_moe" else "Qwen3NextForCausalLM")
    layers = model.model.layers
    attn = layers[3].self_attn
    assert attn.q_proj.out_features == 2 * 16 * 256 and attn.k_proj.out_features == 2 * 256
    assert model.model.rotary_emb.inv_freq.numel() * 2 == 64  # a quarter of the 256-wide head
    gdn = layers[0].linear_attn
    assert (gdn.num_k_heads, gdn.num_v_heads, gdn.head_k_dim, gdn.head_v_dim) == (16, 32, 128, 128)
    moe = layers[0].mlp
    assert moe.gate.top_k == (8 if kind == "qwen3_5_moe" else 10) and moe.experts.num_experts == 16
    assert moe.shared_expert_gate.out_features == 1
    assert [hasattr(layer, "linear_attn") and type(layer.linear_attn).__name__.endswith("GatedDeltaNet")
            for layer in layers] == [True, True, True, False]


def _hf_generate(lm, prompt: list[int], max_new: int) -> list[int]:
    with torch.inference_mode():
        out = lm.model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                                eos_token_id=EOS_ID, pad_token_id=EOS_ID)
    return out[0, len(prompt):].tolist()


@pytest.mark.slow  # transformers' generate on the released layer layout: seconds a case
@pytest.mark.parametrize("kind,n", [("qwen3_5_moe", 7), ("qwen3_next", 40)])
def test_ar_hybrid_equals_transformers_greedy_generate(models, kind, n):
    """A released (no mask_token_id) checkpoint: the engine's AR path == transformers' greedy
    `generate` on the same model, token for token; a warm second request that extends the first
    (its GDN state taken from the prefix cache) == a cold one."""
    lm = models(kind, ar=True)
    assert lm.family.name == "ar" and lm.family.recurrent
    prompt = _prompt(n, seed=3)
    engine = Engine(lm)
    got = engine.generate(prompt, GenerationConfig(max_new_tokens=12))
    assert list(got.token_ids) == _hf_generate(lm, prompt, 12)
    assert got.stats.forwards == len(got.token_ids)
    second = prompt + list(got.token_ids) + _prompt(5, seed=4)
    warm = engine.generate(second, GenerationConfig(max_new_tokens=8))
    cold = Engine(lm, cache_mb=0).generate(second, GenerationConfig(max_new_tokens=8))
    assert warm.token_ids == cold.token_ids and len(warm.token_ids) > 0
    assert warm.stats.reused_tokens == n + len(got.token_ids) - 1  # all the first request ran


EOS_CASE = ("qwen3_next", 8, 0.95, 13)  # EOS made sure at position 21 only: ends inside its second block
# each kind at each block size, the thresholds alternating, the prompt length 5 (inside the first
# block), 13, 16 or 21 (whole blocks plus a tail): thinned pairwise, as each case decodes against
# an uncached recompute
CASES = [("qwen3_5_moe", 4, 0.5, 16), ("qwen3_5_moe", 8, 0.5, 13), ("qwen3_5_moe", 32, 0.95, 16),
         ("qwen3_next", 4, 0.95, 5), EOS_CASE, ("qwen3_next", 32, 0.5, 21)]


@pytest.mark.slow  # each case decodes against an uncached recompute on the released layer layout
@pytest.mark.parametrize("kind,B,threshold,n", CASES)
def test_block_decoding_equals_uncached_recompute(models, kind, B, threshold, n):
    lm = models(kind)
    prompt = _prompt(n)
    budget = 2 * B + 3 if B < 32 else 40  # ends inside a block; at least three blocks when B < 32
    eos_case = (kind, B, threshold, n) == EOS_CASE  # the EOS rule exercised by construction (steer.py)
    with Steer(lm.model, stop_ids(lm), {21: EOS_ID}) if eos_case else nullcontext():
        got = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold,
                                                           block_size=B))
        ids, steps = recompute_generate(lm.model, prompt, mask_id=MASK_ID, block=B, threshold=threshold,
                                        max_new=budget, eos_ids=set(lm.eos_token_ids))
    assert list(got.token_ids) == ids
    assert list(got.stats.steps_per_block) == steps
    if eos_case:
        assert got.finish_reason == "eos" and len(ids) == 21 - n + 1 and ids[-1] == EOS_ID


def _state(cache) -> list[torch.Tensor]:
    """Every tensor the cache holds for the positions it has: GDN conv/recurrent states, KV."""
    tensors = []
    for layer in cache.layers:
        for d in (getattr(layer, "conv_states", None) or {}, getattr(layer, "recurrent_states", None) or {}):
            tensors += [t.clone() for t in d.values() if t is not None]
        if getattr(layer, "keys", None) is not None:
            n = layer.get_seq_length()
            tensors += [layer.keys[..., :n, :].clone(), layer.values[..., :n, :].clone()]
    return tensors


@pytest.mark.slow  # the tiny hybrid's quick check: tests/engine/test_hybrid.py
@pytest.mark.parametrize("kind", KINDS)
def test_denoise_steps_leave_the_gdn_state_bitwise_and_a_fused_commit_keeps_only_the_block(models, kind):
    lm = models(kind)
    B = 8
    prompt = _prompt(19)  # two whole blocks prefilled, a tail of 3 in the decode block
    block = torch.full((B,), MASK_ID)
    block[:3] = torch.tensor(prompt[16:])
    committed = []
    for fuse in (False, True):
        dec = BlockDecoder(lm, prompt, GenerationConfig(max_new_tokens=8, block_size=B), fuse_commit=fuse)
        cache = make_cache(lm.model)
        dec._prefill(cache, 16)
        before = _state(cache)
        assert len(before) == 3 * 2 + 2  # three GDN layers (conv + recurrent), one attention layer
        saved = snapshot_recurrent(cache)
        assert sorted(saved) == [0, 1, 2]
        steps = block.clone()
        for step in range(4):
            steps[3 + step] = 100 + step  # the block changes between steps, as while decoding
            dec._denoise(steps, 16, cache, saved)
            assert all(torch.equal(a, b) for a, b in zip(before, _state(cache)))
        dec._commit(steps, 16, cache, with_next=fuse)
        after = _state(cache)
        assert not any(torch.equal(a, b) for a, b in zip(before[:6], after[:6]))  # GDN moved on
        committed.append(after)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-12) for a, b in zip(*committed))


@pytest.mark.slow  # two decodes a kind (the tiny hybrid's quick check: tests/engine/test_hybrid.py)
@pytest.mark.parametrize("kind", KINDS)
def test_fused_commit_equals_separate_forwards(models, kind):
    lm = models(kind)
    prompt, cfg = _prompt(13), GenerationConfig(max_new_tokens=19, threshold=0.5, block_size=8)
    with Steer(lm.model, stop_ids(lm)):  # only the budget ends the run (steer.py): 3 blocks of 8
        fused = Engine(lm, fuse_commit=True).generate(prompt, cfg)
        separate = Engine(lm, fuse_commit=False).generate(prompt, cfg)
    assert fused.token_ids == separate.token_ids and len(fused.token_ids) == 19
    assert fused.stats.steps_per_block == separate.stats.steps_per_block
    assert separate.stats.forwards - fused.stats.forwards == fused.stats.blocks - 1 == 2


@pytest.mark.slow  # ~10 s a case (the tiny hybrid's quick check: tests/engine/test_prefix_reuse.py)
@pytest.mark.parametrize("kind,case", [("qwen3_5_moe", "extends"), ("qwen3_5_moe", "inside_answer"),
                                       ("qwen3_next", "boundary")])
def test_warm_request_from_the_prefix_cache_equals_a_cold_one(models, kind, case):
    """The agent-step case: request 2 = request 1's prompt and answer + a tool result ("extends":
    reuses the whole entry), or shares only part of the answer ("inside_answer": the GDN state
    is restored from the snapshot kept at request 1's prompt boundary), or only the prompt's
    whole blocks. Warm ids == cold ids, and exactly the expected positions are reused."""
    lm = models(kind)
    B = 8
    cfg = GenerationConfig(max_new_tokens=20, threshold=0.5, block_size=B)
    first = _prompt(21, seed=5)
    engine = Engine(lm, cache_mb=512)
    with Steer(lm.model, stop_ids(lm)):  # only the budget ends request 1 (steer.py): 4 blocks
        one = engine.generate(first, cfg)
    (entry,) = engine.prefix_cache.entries
    kept = list(entry.tokens)
    boundary = len(first) // B * B  # 16: request 1's prompt boundary, where its GDN state was kept
    assert one.finish_reason == "length" and one.stats.blocks == 4
    assert kept[:len(first)] == first and len(kept) == boundary + 3 * B  # every block but the last committed
    assert sorted(entry.states) == [boundary]
    tool = _prompt(11, seed=6)
    if case == "extends":
        second, expected = first + list(one.token_ids) + tool, len(kept)
    elif case == "inside_answer":
        second, expected = kept[:boundary + B + 3] + tool, boundary
    else:
        second, expected = first[:boundary] + tool, boundary
    warm = engine.generate(second, cfg)
    cold = Engine(lm, cache_mb=0).generate(second, cfg)
    assert warm.token_ids == cold.token_ids
    assert warm.stats.steps_per_block == cold.stats.steps_per_block
    assert warm.stats.reused_tokens == expected and cold.stats.reused_tokens == 0
    assert warm.stats.prefilled_tokens == len(second) // B * B - expected


@pytest.mark.slow  # ~17 s: two more checkpoints and transformers' generate
def test_the_released_multimodal_file_layout_decodes_as_transformers(tmp_path):
    """A directory laid out as the Qwen3.5-MoE release is (nested text_config, the vision tower's
    weights beside the language model's) loads as the text model, vision weights left out, and
    the engine's AR decode equals transformers' greedy generate with the released class; with a
    mask_token_id and block_size added it block-decodes as the recompute reference."""
    from transformers import Qwen3_5MoeForConditionalGeneration

    path = build_released_layout(tmp_path / "m")
    raw = json.loads((path / "config.json").read_text())
    assert raw["model_type"] == "qwen3_5_moe" and raw["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    lm = load_model(str(path), dtype=DTYPE)
    configure_cpu_threads(lm.model)
    assert (lm.family.name, lm.family.recurrent) == ("ar", True)
    assert type(lm.model).__name__ == "Qwen3_5MoeForCausalLM"
    assert lm.context_window == 32768 and lm.eos_token_ids[0] == EOS_ID  # read from text_config
    assert not any("visual" in name for name, _ in lm.model.named_parameters())
    prompt = _prompt(9, seed=7)
    got = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=10))
    released = Qwen3_5MoeForConditionalGeneration.from_pretrained(
        str(path), dtype=torch.float64, experts_implementation="eager").eval()  # no float64 grouped_mm
    with torch.inference_mode():
        ref = released.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False,
                                eos_token_id=EOS_ID, pad_token_id=EOS_ID)[0, len(prompt):].tolist()
    assert list(got.token_ids) == ref and len(ref) > 0
    # the same layout made block-diffusion (mask_token_id and block_size beside text_config)
    (path / "config.json").write_text(json.dumps(dict(raw, mask_token_id=MASK_ID, block_size=8)))
    lm = load_model(str(path), dtype=DTYPE)
    assert (lm.family.name, lm.block_size) == ("hybrid", 8)
    got = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=12, threshold=0.5))
    ids, steps = recompute_generate(lm.model, prompt, mask_id=MASK_ID, block=8, threshold=0.5,
                                    max_new=12, eos_ids=set(lm.eos_token_ids))
    assert list(got.token_ids) == ids and list(got.stats.steps_per_block) == steps
