"""docs/engine.md, exactness test 4 (AR path == transformers greedy generate) and loader errors."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import ModelLoadError, load_model, resolve_hf_cache
from steer import Rows
from tiny_checkpoints import build_tiny_checkpoint


@pytest.mark.parametrize("kind", ["ar", "ar_llama"])
def test_ar_path_equals_transformers_greedy_generate(tiny_dirs, kind):
    lm = load_model(str(tiny_dirs[kind]))
    assert not lm.is_diffusion
    prompt = lm.encode("def add(a, b):\n    return")
    ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=24))
    reference = load_model(str(tiny_dirs[kind]), native=False).model  # transformers' own network
    with torch.inference_mode():
        ref = reference.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                eos_token_id=list(lm.eos_token_ids), pad_token_id=0)
    expected = ref[0, len(prompt):].tolist()
    assert list(ours.token_ids) == expected
    assert ours.stats.tpf == 1.0


def test_ar_sampling_is_reproducible_with_a_seed(tiny_dirs):
    lm = load_model(str(tiny_dirs["ar"]))
    prompt = lm.encode("hello")
    cfg = dict(max_new_tokens=16, temperature=1.0, top_p=0.9)
    a = Engine(lm).generate(prompt, GenerationConfig(seed=3, **cfg))
    b = Engine(lm).generate(prompt, GenerationConfig(seed=3, **cfg))
    assert a.token_ids == b.token_ids


def test_ar_sampling_draws_from_a_generator_seeded_with_the_seed(tiny_dirs):
    """Every row made exactly uniform over four tokens (steer.py's Rows: the rest -1e4, so the
    softmax is 0.25 each and the 0.9 nucleus keeps all four), the ids are the draws of
    torch.multinomial from a generator seeded with cfg.seed, repeated here: a run that ignored
    the seed (or drew from another stream) would not give them."""
    lm = load_model(str(tiny_dirs["ar"]))
    prompt, vocab = lm.encode("hello"), lm.model.config.vocab_size
    four = [t for t in range(100, 200) if t not in lm.eos_token_ids][:4]
    cfg = dict(max_new_tokens=16, temperature=1.0, top_p=0.9)
    with Rows(lm.model, lambda p, seq: (-1e4, dict.fromkeys(four, 0.0))):
        got = {seed: list(Engine(lm).generate(prompt, GenerationConfig(seed=seed, **cfg)).token_ids)
               for seed in (3, 4)}
    probs = torch.zeros(1, vocab)
    probs[0, four] = 0.25
    want = {}
    for seed in (3, 4):
        g = torch.Generator().manual_seed(seed)
        want[seed] = [int(torch.multinomial(probs, 1, generator=g)) for _ in range(16)]
    assert got == want and want[3] != want[4]


def test_diffusion_sampling_is_reproducible_with_a_seed(tiny_dirs):
    lm = load_model(str(tiny_dirs["clover"]))
    prompt = lm.encode("hello")
    cfg = dict(max_new_tokens=20, temperature=0.8)
    a = Engine(lm).generate(prompt, GenerationConfig(seed=1, **cfg))
    b = Engine(lm).generate(prompt, GenerationConfig(seed=1, **cfg))
    assert a.token_ids == b.token_ids


def test_families_are_detected(tiny_dirs):
    assert load_model(str(tiny_dirs["clover"])).family.name == "clover"
    fast = load_model(str(tiny_dirs["fast_dllm_v2"]))
    assert fast.family.shifted_logits and fast.block_size == 8
    assert load_model(str(tiny_dirs["sdar"])).block_size == 4
    assert load_model(str(tiny_dirs["clover"]), block_size=4).block_size == 4


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _one_line_error(spec) -> str:
    with pytest.raises(ModelLoadError) as info:
        load_model(str(spec))
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_missing_config(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["clover"], tmp_path / "m")
    (d / "config.json").unlink()
    assert "missing config.json" in _one_line_error(d)


def test_broken_config_json(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["clover"], tmp_path / "m")
    (d / "config.json").write_text("{not json")
    assert "not valid JSON" in _one_line_error(d)


def test_missing_weights(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["clover"], tmp_path / "m")
    (d / "model.safetensors").unlink()
    assert "no *.safetensors" in _one_line_error(d)


def test_unknown_architecture(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["ar"], tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "wobblenet"
    (d / "config.json").write_text(json.dumps(cfg))
    assert "unknown architecture 'wobblenet'" in _one_line_error(d)


def test_shape_mismatch(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["clover"], tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 96
    (d / "config.json").write_text(json.dumps(cfg))
    assert "mismatch" in _one_line_error(d) or "size" in _one_line_error(d)


def test_diffusion_family_without_mask_id(tiny_dirs, tmp_path):
    d = _copy(tiny_dirs["sdar"], tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    del cfg["mask_token_id"]
    (d / "config.json").write_text(json.dumps(cfg))
    assert "no mask_token_id" in _one_line_error(d)


def test_missing_tensor_is_not_silently_random(tiny_dirs, tmp_path):
    from safetensors.torch import load_file, save_file

    d = _copy(tiny_dirs["clover"], tmp_path / "m")
    weights = load_file(str(d / "model.safetensors"))
    weights.pop("model.layers.1.mlp.up_proj.weight")
    save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})
    assert "missing weights" in _one_line_error(d)


def test_hf_spec_resolves_only_in_local_cache(tiny_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache"):
        load_model("hf:acme/nothing")
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    _copy(tiny_dirs["clover"], snap)
    (tmp_path / "hub" / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny" / "refs" / "main").write_text("abc123")
    assert resolve_hf_cache("acme/tiny") == snap
    assert load_model("hf:acme/tiny").family.name == "clover"


def test_bad_specs():
    for spec, words in [("hf:noslash", "hf:ORG/NAME"), ("openai:nourl", "BASE_URL"),
                        ("/definitely/not/here", "unknown model spec")]:
        with pytest.raises(ModelLoadError, match=words):
            load_model(spec)


@pytest.mark.slow
def test_smollm2_gguf_answers():
    lm = load_model("smollm2")
    assert not lm.is_diffusion
    prompt = lm.encode(lm.render_chat([{"role": "user", "content": "What is the capital of France?"}]))
    result = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=20))
    assert "Paris" in result.text


def test_loading_shows_no_transformers_progress_bar_and_restores_the_setting(tiny_dirs, capfd):
    """The "Loading weights" bar and transformers' warnings would land in `clover run`'s output
    and under the TUI; the transformers path (native=False) turns them off while it loads."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_info()
    try:
        load_model(str(tiny_dirs["clover"]), native=False)
        assert "Loading weights" not in capfd.readouterr().err
        assert hf_logging.is_progress_bar_enabled()  # the caller's settings are back
        assert hf_logging.get_verbosity() == hf_logging.INFO
        hf_logging.disable_progress_bar()
        load_model(str(tiny_dirs["clover"]), native=False)
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()
