"""Block expansion (`clover train --from DIR --grow-layers K [--train-new-only]`): the grown
model starts out computing exactly what --from did, and with --train-new-only only the inserted
layers learn."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.model.test_trainer import _cfg, corpus_dir  # noqa: F401 (fixture)


def test_new_layers_go_after_evenly_spaced_groups():
    from clover_cli.training.modeling import new_layer_indices

    assert new_layer_indices(6, 3) == [2, 5, 8]
    assert new_layer_indices(6, 2) == [3, 7]
    assert new_layer_indices(6, 1) == [6]
    assert new_layer_indices(2, 2) == [1, 3]
    for bad in (0, 7):
        with pytest.raises(ValueError, match="grow by 1 to 6"):
            new_layer_indices(6, bad)


def test_grown_model_computes_what_the_old_one_did(bundled_dir):
    import torch
    from transformers import AutoTokenizer

    from clover_cli.training import modeling

    tok = AutoTokenizer.from_pretrained(str(bundled_dir))
    torch.manual_seed(0)
    model = modeling.build_model(modeling.new_config(tok, "micro")).eval()
    ids = torch.randint(0, len(tok), (2, 40))
    with torch.no_grad():
        want = model(ids).logits
    for k in (1, 2):
        grown = modeling.grow_layers(model, k).eval()
        assert grown.config.num_hidden_layers == 2 + k
        assert len(grown.config.layer_types) == 2 + k
        assert [layer.self_attn.layer_idx for layer in grown.model.layers] == list(range(2 + k))
        with torch.no_grad():
            got = grown(ids).logits
        assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()
        for i in modeling.new_layer_indices(2, k):
            layer = grown.model.layers[i]
            assert not layer.self_attn.o_proj.weight.any() and not layer.mlp.down_proj.weight.any()
            assert layer.self_attn.q_proj.weight.any()  # a copy, not an empty layer
        assert grown.lm_head.weight.data_ptr() == grown.model.embed_tokens.weight.data_ptr()
    assert modeling.param_count(modeling.grow_layers(model, 1)) > modeling.param_count(model)


def test_train_new_only_trains_the_grown_layers_and_freezes_the_rest(tmp_path, corpus_dir,
                                                                      bundled_dir):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from clover_cli.training.trainer import Trainer

    Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=4, log_every=2, save_every=4),
            echo=lambda s: None).run()
    first = tmp_path / "run" / "model"
    old = load_file(str(first / "model.safetensors"))
    lines: list[str] = []
    second = tmp_path / "grown"
    kw = dict(out=str(second), tokenizer_dir=None, from_dir=str(first), grow_layers=1,
              train_new_only=True, log_every=2, save_every=4)
    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=4, **kw), echo=lines.append)
    assert any("training only the grown layers [2]" in x for x in lines), lines
    assert {id(p) for g in tr.opt.param_groups for p in g["params"]} == {
        id(p) for n, p in tr.model.named_parameters() if n.startswith("model.layers.2.")}
    tr.run()
    new = load_file(str(second / "model" / "model.safetensors"))
    assert json.loads((second / "model" / "config.json").read_text())["num_hidden_layers"] == 3
    for name in ("model.embed_tokens.weight", "model.norm.weight",
                 "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.up_proj.weight"):
        assert torch.equal(new[name], old[name]), name  # frozen
    assert new["model.layers.2.self_attn.o_proj.weight"].any()  # the new layer learned
    assert new["model.layers.2.mlp.down_proj.weight"].any()
    # resuming finds the same layers to train and does not grow again
    tr2 = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=6, **kw), echo=lambda s: None)
    assert tr2.step == 4 and tr2.model.config.num_hidden_layers == 3
    assert [n for n, p in tr2.model.named_parameters() if p.requires_grad] == [
        n for n, _ in tr2.model.named_parameters() if n.startswith("model.layers.2.")]
    tr2.run()
    loaded = AutoModelForCausalLM.from_pretrained(str(second / "model"))
    assert loaded.config.num_hidden_layers == 3 and loaded.config.mask_token_id is not None


def test_grow_flags_need_a_start_checkpoint(tmp_path, corpus_dir, bundled_dir):
    for kw in (dict(grow_layers=1), dict(train_new_only=True)):
        with pytest.raises(ValueError, match="--grow-layers needs --from"):
            _cfg(tmp_path, corpus_dir, bundled_dir, **kw)


def test_grow_flags_reach_the_trainer(tmp_path, train_configs):
    from clover_cli.commands.train_cmd import train

    seen = train_configs
    base = ["--out", str(tmp_path / "run"), "--from", str(tmp_path), "--no-eval"]
    for flags, want in (([], (0, False)), (["--grow-layers", "3", "--train-new-only"], (3, True))):
        res = CliRunner().invoke(train, base + flags)
        assert res.exit_code == 1 and "stopped by the test" in res.output, res.output
        assert (seen[-1].grow_layers, seen[-1].train_new_only) == want
    res = CliRunner().invoke(train, ["--out", str(tmp_path / "r"), "--grow-layers", "1"])
    assert res.exit_code == 1 and "--grow-layers needs --from" in res.output, res.output
