"""A forward whose queries are one block right after the cache (a denoise step) attends to every
key, so its block-causal mask is all zeros: our networks get no mask there, transformers' keep
the zero mask (for None they would build a causal one) and our SDPA hook skips reading it inside
a denoise step (docs/engine.md, "Decoding rule"). Ids equal the masked path's for every family."""
from __future__ import annotations

import pytest
import torch

from clover_cli.engine import kernel_hooks
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from clover_cli.engine.runtime import block_causal_mask
from hybrid_real import build as build_hybrid
from realcfg import build, released

LLADA2_SMALL = dict(vocab_size=2048, mask_token_id=2000, eos_token_id=2001, pad_token_id=2001,
                    num_experts=16, moe_intermediate_size=32, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, intermediate_size=128)


@pytest.fixture(scope="module")
def llada2_dirs(tmp_path_factory):
    """A LLaDA2.0 and a LLaDA2.1-named copy (token editing) on a 2,048-id vocabulary."""
    raw = dict(released("llada2_mini.reconstructed.json"), **LLADA2_SMALL)
    root = tmp_path_factory.mktemp("llada2_small")
    return {name: build(raw, root / name, hf_type="llada2_moe", stop_ids=(2001,), eos_boost=0.3)
            for name in ("LLaDA2.0-small", "LLaDA2.1-small")}


def _forwards(model) -> tuple[list, object]:
    """(query count, attention_mask) of every forward `model` runs, by a forward pre-hook."""
    seen: list = []

    def hook(_module, _args, kwargs):
        seen.append((kwargs["input_ids"].shape[1], kwargs.get("attention_mask")))

    return seen, model.register_forward_pre_hook(hook, with_kwargs=True)


def _zero_mask_back(model, block: int):
    """The masked path: a forward given no mask gets the block-causal mask of its positions,
    as the decoder passed before, and it must be all zeros."""
    dtype = next(model.parameters()).dtype

    def hook(_module, args, kwargs):
        if kwargs.get("attention_mask") is not None:
            return None
        t, cached = kwargs["input_ids"].shape[1], kwargs["cache"].get_seq_length()
        mask = block_causal_mask(torch.arange(cached, cached + t), cached + t, block, dtype)
        assert not mask.any()
        return args, dict(kwargs, attention_mask=mask)

    return model.register_forward_pre_hook(hook, with_kwargs=True)


def _prompt(n: int, lo: int, hi: int) -> list[int]:
    return torch.randint(lo, hi, (n,), generator=torch.Generator().manual_seed(n)).tolist()


def _decode(lm, prompt, cfg, fuse: bool = True):
    result = Engine(lm, fuse_commit=fuse).generate(prompt, cfg, reuse=False)
    return list(result.token_ids), list(result.stats.steps_per_block)


OWN = [("clover", 0.95, True), ("clover", 0.3, False), ("sdar", 0.95, True),
       ("fast_dllm_v2", 0.95, True), ("LLaDA2.0-small", 0.5, True), ("LLaDA2.1-small", 0.5, True)]


@pytest.mark.parametrize("kind,threshold,fuse", OWN, ids=[f"{k}-{t}-{'fused' if f else 'separate'}"
                                                          for k, t, f in OWN])
def test_our_networks_take_no_mask_for_one_block(tiny_dirs, llada2_dirs, kind, threshold, fuse):
    path = llada2_dirs[kind] if kind.startswith("LLaDA") else tiny_dirs[kind]
    lm = load_model(str(path), dtype="float64")
    assert lm.model.mask_free_forward
    B = lm.block_size
    lo, hi = (1000, 1200) if kind.startswith("LLaDA") else (20, 200)  # ids its head predicts
    prompt = _prompt(2 * B + 3, lo, hi)
    cfg = GenerationConfig(max_new_tokens=3 * B, threshold=threshold)
    seen, handle = _forwards(lm.model)
    try:
        got = _decode(lm, prompt, cfg, fuse)
    finally:
        handle.remove()
    one_block = [mask for t, mask in seen if t <= B]
    longer = [mask for t, mask in seen if t > B]  # the prefill (2 blocks), fused commits
    assert len(one_block) >= 3 and longer
    assert all(mask is None for mask in one_block)
    assert all(isinstance(mask, torch.Tensor) and mask.any() for mask in longer)
    handle = _zero_mask_back(lm.model, B)
    try:
        assert got == _decode(lm, prompt, cfg, fuse)
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def qwen3_5_moe_dir(tmp_path_factory):
    """A Qwen3.5-MoE hybrid on its released layout (hybrid_real.py), blocks of 8."""
    return build_hybrid("qwen3_5_moe", tmp_path_factory.mktemp("mask_free") / "q35", block_size=8)


def _attention_layers(model) -> int:
    config = getattr(model.config, "text_config", None) or model.config
    types = getattr(config, "layer_types", None)
    return sum(t == "full_attention" for t in types) if types else config.num_hidden_layers


@pytest.mark.parametrize("kind,threshold", [("hybrid", 0.95), ("qwen3_5_moe", 0.6),  # (its GDN
                                              ("clover-transformers", 0.95)])  # forwards are slow)
@pytest.mark.slow
def test_transformers_networks_keep_the_zero_mask_and_sdpa_skips_it(tiny_dirs, qwen3_5_moe_dir, kind,
                                                                     threshold):
    """Qwen3-Next, Qwen3.5-MoE and transformers' Qwen3: the forward still gets the (zero) mask,
    the attention hook reads none in every denoise step, and the ids are transformers' own
    SDPA's, which reads the mask."""
    path = qwen3_5_moe_dir if kind == "qwen3_5_moe" else tiny_dirs[kind.split("-")[0]]
    lm = load_model(str(path), dtype="float64", native=False)
    assert not getattr(lm.model, "mask_free_forward", False)
    engine = Engine(lm)
    assert lm.model.config._attn_implementation == kernel_hooks.GQA_SDPA_NAME
    B = lm.block_size
    prompt, cfg = _prompt(2 * B + 3, 20, 200), GenerationConfig(max_new_tokens=3 * B, threshold=threshold)
    seen, handle = _forwards(lm.model)
    before = kernel_hooks.CALLS["sdpa_no_mask"]
    try:
        result = engine.generate(prompt, cfg, reuse=False)
    finally:
        handle.remove()
    steps = [mask for t, mask in seen if t == B]  # the prefill is 2 blocks, fused commits too
    assert len(steps) >= 3 and all(mask is not None and not mask.any() for mask in steps)
    assert kernel_hooks.CALLS["sdpa_no_mask"] - before == len(steps) * _attention_layers(lm.model)
    lm.model.set_attn_implementation("sdpa")  # transformers' own SDPA: the mask is read
    masked = engine.generate(prompt, cfg, reuse=False)
    assert list(result.token_ids) == list(masked.token_ids)
    assert result.stats.steps_per_block == masked.stats.steps_per_block
