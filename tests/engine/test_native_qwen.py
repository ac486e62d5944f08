"""docs/engine.md, "Native models": our own Qwen3/Qwen2 module equals transformers' network, the
switch back to transformers works, unusual configs fall back to it. (That loading `tiny` imports no
transformers at all is tests/engine/test_own_tokenizer.py's test_load_and_decode_tiny_import_no_transformers.)"""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from clover_cli.engine.loader import ModelLoadError, bundled_tiny_dir, load_model
from clover_cli.engine.models.qwen import QwenForCausalLM, unsupported
from clover_cli.engine.runtime import block_causal_mask, make_cache
from tiny_checkpoints import build_tiny_checkpoint


def _biased_qwen2(tmp_path):
    """A Fast-dLLM v2 (Qwen2-shaped) checkpoint whose q/k/v biases are not zero."""
    from safetensors.torch import load_file, save_file

    d = build_tiny_checkpoint(tmp_path / "fdllm", "fast_dllm_v2", block_size=8, logit_scale=4.0)
    weights = load_file(str(d / "model.safetensors"))
    gen = torch.Generator().manual_seed(1)
    biases = [k for k in weights if k.endswith("_proj.bias")]
    assert biases  # Qwen2 has q/k/v biases
    for k in biases:
        weights[k] = torch.randn(weights[k].shape, generator=gen) * 0.5
    save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def _logits(lm, ids: list[int], split: int, block: int) -> torch.Tensor:
    """Prefill ids[:split] then the rest as one block, both under the block-causal 4-D mask and
    with each model's own cache (engine/runtime.py make_cache: ours for the native module,
    DynamicCache for transformers'); returns the logits of both forwards, [len(ids), V]."""
    model = lm.model
    cache = make_cache(model)
    outs = []
    with torch.inference_mode():
        for lo, hi in ((0, split), (split, len(ids))):
            pos = torch.arange(lo, hi)
            mask = block_causal_mask(pos, hi, block, next(model.parameters()).dtype)
            out = model(input_ids=torch.tensor(ids[lo:hi])[None], position_ids=pos[None],
                        attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=0)
            outs.append(out.logits[0].float())
    return torch.cat(outs)


def _dirs(tiny_dirs, tmp_path):
    return {"qwen3": tiny_dirs["clover"], "sdar": tiny_dirs["sdar"], "ar": tiny_dirs["ar"],
            "qwen2_bias": _biased_qwen2(tmp_path), "tiny": bundled_tiny_dir(), "llama": tiny_dirs["ar_llama"]}


@pytest.mark.parametrize("kind", ["qwen3", "sdar", "ar", "qwen2_bias", "tiny", "llama"])
def test_native_logits_equal_transformers(tiny_dirs, tmp_path, kind):
    d = _dirs(tiny_dirs, tmp_path)[kind]
    native = load_model(str(d), dtype="float32")
    ref = load_model(str(d), dtype="float32", native=False)
    assert isinstance(native.model, QwenForCausalLM)
    assert not isinstance(ref.model, QwenForCausalLM)
    assert native.eos_token_ids == ref.eos_token_ids
    ids = native.encode("def add(a, b):\n    return a + b\nclass Point:\n    x: int = 0\n")[:21]
    block = 8
    split = (len(ids) - 5) // block * block  # prefill whole blocks, then a partial block
    got, want = _logits(native, ids, split, block), _logits(ref, ids, split, block)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_logits_to_keep_and_no_mask(tiny_dirs):
    lm = load_model(str(tiny_dirs["ar"]), dtype="float32")
    ref = load_model(str(tiny_dirs["ar"]), dtype="float32", native=False)
    ids = torch.tensor(lm.encode("for i in range(10):\n    total"))[None]
    pos = torch.arange(ids.shape[1])[None]
    with torch.inference_mode():
        got = lm.model(input_ids=ids, position_ids=pos, attention_mask=None, cache=make_cache(lm.model),
                       logits_to_keep=2).logits
        want = ref.model(input_ids=ids, position_ids=pos, attention_mask=None,
                         cache=make_cache(ref.model), logits_to_keep=2).logits
    assert got.shape[1] == 2
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_switch_back_to_transformers(tiny_dirs, monkeypatch):
    monkeypatch.setenv("CLOVER_NATIVE_MODELS", "0")
    assert not isinstance(load_model(str(tiny_dirs["clover"])).model, QwenForCausalLM)
    assert isinstance(load_model(str(tiny_dirs["clover"]), native=True).model, QwenForCausalLM)
    monkeypatch.setenv("CLOVER_NATIVE_MODELS", "1")
    assert isinstance(load_model(str(tiny_dirs["clover"])).model, QwenForCausalLM)


@pytest.mark.parametrize("change,reason", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, "rope_parameters"),
    ({"use_sliding_window": True}, "sliding window"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"model_type": "mistral"}, "model_type"),
])
def test_unusual_configs_take_the_transformers_path(tiny_dirs, tmp_path, change, reason):
    raw = json.loads((tiny_dirs["clover"] / "config.json").read_text())
    assert unsupported(raw, torch.float32) is None
    assert reason in unsupported(dict(raw, **change), torch.float32)
    if change.get("model_type") != "mistral":
        d = tmp_path / "ckpt"
        shutil.copytree(tiny_dirs["clover"], d)
        (d / "config.json").write_text(json.dumps(dict(raw, **change)))
        assert not isinstance(load_model(str(d)).model, QwenForCausalLM)


def test_missing_or_misshaped_tensor_is_one_line(tiny_dirs, tmp_path):
    from safetensors.torch import load_file, save_file

    for edit, words in (("drop", "missing weights"), ("shape", "shape mismatch")):
        d = tmp_path / edit
        shutil.copytree(tiny_dirs["clover"], d)
        weights = load_file(str(d / "model.safetensors"))
        key = "model.layers.1.self_attn.k_norm.weight"
        if edit == "drop":
            del weights[key]
        else:
            weights[key] = torch.ones(3)
        save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})
        with pytest.raises(ModelLoadError) as err:
            load_model(str(d))
        assert words in str(err.value) and key in str(err.value) and "\n" not in str(err.value)


def test_generic_tokenizer_skips_autotokenizer_and_encodes_the_same():
    from transformers import AutoTokenizer

    lm = load_model("tiny")
    auto = AutoTokenizer.from_pretrained(str(bundled_tiny_dir()), local_files_only=True)
    assert type(lm.tokenizer).__name__ == "CheckpointTokenizer"  # engine/tokenizer.py, no transformers
    text = "def add(a, b):\n    return a + b <|im_end|> héllo"
    assert lm.tokenizer.encode(text) == auto.encode(text)
    assert lm.tokenizer.chat_template == auto.chat_template
    assert (lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id) == (auto.eos_token_id, auto.pad_token_id)
