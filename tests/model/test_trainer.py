"""The trainer reduces loss on a tiny corpus, resumes, and adapts an AR checkpoint."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

CODE = '''def add(a, b):
    return a + b


def mul(a, b):
    return a * b


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y
'''


@pytest.fixture()
def corpus_dir(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    for i in range(3):
        (d / f"m{i}.py").write_text(CODE)
    return d


def _cfg(tmp_path, corpus_dir, bundled_dir, **kw):
    from clover_cli.training.trainer import TrainConfig

    base = dict(out=str(tmp_path / "run"), size="micro", tokenizer_dir=str(bundled_dir),
                seq_len=64, batch_size=4, lr=1e-2, warmup=2, steps=30, log_every=5,
                save_every=15, eval_every=1000, code_root=str(corpus_dir),
                mix={"code": 1.0}, ar_fraction=0.0, threads=1)
    base.update(kw)
    return TrainConfig(**base)


def test_loss_goes_down_and_resume(tmp_path, corpus_dir, bundled_dir):
    from clover_cli.training.trainer import Trainer

    lines: list[str] = []
    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir), echo=lines.append)
    tr.run()
    recs = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in recs]
    assert len(losses) == 6
    assert losses[-1] < losses[0] - 1.0, losses
    assert any("tok/s" in x for x in lines)
    assert any("[" + "#" * 20 + "] 100%" in x for x in lines)  # progress bar at the end
    assert any("ETA" in x for x in lines)
    state = json.loads((tmp_path / "run" / "train_state.json").read_text())
    assert state["step"] == 30
    # resume: continues from step 30 up to 36 with the saved optimizer state
    tr2 = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=36), echo=lines.append)
    assert tr2.step == 30
    tr2.run()
    assert json.loads((tmp_path / "run" / "train_state.json").read_text())["step"] == 36
    assert any("resumed" in x for x in lines)


@pytest.mark.parametrize("ar_fraction,kind", [(1.0, "ar"), (0.0, "bd")])
def test_ar_fraction_picks_each_micro_batchs_layout(tmp_path, corpus_dir, bundled_dir, ar_fraction, kind):
    """ar_fraction 1: every micro-batch trains the AR layout (block 1, all masked), logged as
    ar_loss with no block-diffusion loss; 0: the block layout only."""
    import math

    from clover_cli.training.trainer import Trainer

    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=4, log_every=2, ar_fraction=ar_fraction,
                      mix={"code": 1.0, "curriculum": 1.0}), echo=lambda s: None)
    assert {tr.micro_step()[1] for _ in range(4)} == {kind}
    tr.opt.zero_grad(set_to_none=True)
    tr.run()
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [2, 4]
    other = "loss" if kind == "ar" else "ar_loss"
    mine = "ar_loss" if kind == "ar" else "loss"
    assert all(r[other] is None and math.isfinite(r[mine]) and r[mine] > 0 for r in log)


def test_dense_copy_source_trains(tmp_path, corpus_dir, bundled_dir):
    from clover_cli.training.trainer import Trainer

    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=4, mix={"dense_copy": 1.0}),
                 echo=lambda s: None)
    assert set(tr.mix.sources) == {"dense_copy"}
    rec = tr.run()
    assert rec["loss"] is not None and rec["loss"] > 0


def test_adapt_ar_checkpoint(tmp_path, corpus_dir, bundled_dir):
    """A random AR Qwen3 (no mask token, no block size) adapted for a few steps loads back as a
    block-diffusion model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config
    from transformers import Qwen3ForCausalLM

    from clover_cli.training.tokenizer import train_tokenizer
    from clover_cli.training.trainer import Trainer

    ar = tmp_path / "ar"
    raw = train_tokenizer([corpus_dir / "m0.py"], vocab_size=300)
    fast = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|endoftext|>")
    ar_tok_len = len(fast)
    cfg = Qwen3Config(vocab_size=ar_tok_len, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=16, tie_word_embeddings=True)
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(str(ar))
    fast.save_pretrained(str(ar))
    assert "mask_token_id" not in json.loads((ar / "config.json").read_text())

    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, tokenizer_dir=None, from_dir=str(ar),
                      steps=6, log_every=3, save_every=6), echo=lambda s: None)
    tr.run()
    out = tmp_path / "run" / "model"
    conf = json.loads((out / "config.json").read_text())
    assert conf["block_size"] == 32 and isinstance(conf["mask_token_id"], int)
    assert AutoConfig.from_pretrained(str(out)).mask_token_id == conf["mask_token_id"]
    model = AutoModelForCausalLM.from_pretrained(str(out))
    assert model.get_input_embeddings().weight.shape[0] >= conf["mask_token_id"] + 1
    from transformers import AutoTokenizer
    t = AutoTokenizer.from_pretrained(str(out))
    assert t.convert_tokens_to_ids("<|mask|>") == conf["mask_token_id"]


def test_export_to_bf16(tmp_path, corpus_dir, bundled_dir):
    from clover_cli.training.modeling import export_model
    from clover_cli.training.trainer import Trainer

    Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=2, log_every=1, save_every=2),
            echo=lambda s: None).run()
    dest = tmp_path / "ship"
    dest.mkdir()
    (dest / "README.md").write_text("card")
    export_model(tmp_path / "run", dest)
    assert (dest / "README.md").read_text() == "card"
    conf = json.loads((dest / "config.json").read_text())
    assert conf["dtype"] == "bfloat16" and conf["block_size"] == 32
    assert (dest / "tokenizer_config.json").exists() and (dest / "model.safetensors").exists()


def test_bf16_training_steps(tmp_path, corpus_dir, bundled_dir):
    import torch

    from clover_cli.training.trainer import Trainer

    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=3, log_every=3, save_every=3,
                      dtype="bfloat16"), echo=lambda s: None)
    assert next(tr.model.parameters()).dtype == torch.bfloat16
    rec = tr.run()
    assert rec["loss"] == rec["loss"] and rec["loss"] < 12  # finite, not NaN


def test_packer_refuses_rows_no_example_fits(tok):
    """A row length shorter than every example is an error, not a row of padding."""
    import random

    from clover_cli.training.data import PackedChatSource

    long_chat = tok.apply_chat_template(
        [{"role": "user", "content": "word " * 200}, {"role": "assistant", "content": "ok"}],
        tokenize=False)
    src = PackedChatSource(tok, lambda r: long_chat, n=64)
    with pytest.raises(ValueError, match="no chat example fits"):
        src.row(random.Random(0), 64)


def test_evaluator_reports_teacher_forced_copy(tmp_path, corpus_dir, bundled_dir, monkeypatch):
    from clover_cli.training import evaluation_hooks
    from clover_cli.training.data import CodeSource
    from clover_cli.training.trainer import Trainer

    files = sorted(corpus_dir.glob("*.py"))
    monkeypatch.setattr(evaluation_hooks, "CodeSource",
                        lambda tok, split: CodeSource(tok, split, files=files, n=64))
    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=1), echo=lambda s: None)
    res = evaluation_hooks.make_evaluator(tr, n_code_rows=1, n_calls=1)(tr)
    assert 0.0 <= res["copy_tf"] <= 1.0 and res["code_loss"] > 0
    # an untrained micro model does not copy: a copier would score near 1
    assert res["copy_tf"] < 0.5
    assert 0.0 <= res["word_copy_tf"] < 0.5


def test_continue_a_diffusion_checkpoint_keeps_its_record(tmp_path, corpus_dir, bundled_dir):
    """`--from` a block-diffusion checkpoint of ours (the bundled model on a new machine, whose
    run directory is gone) starts from its weights and sums its training record."""
    import torch
    from safetensors.torch import load_file

    from clover_cli.training.trainer import Trainer

    Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, steps=6, log_every=3, save_every=6),
            echo=lambda s: None).run()
    first = tmp_path / "run"
    a = json.loads((first / "train_state.json").read_text())
    weights = load_file(str(first / "model" / "model.safetensors"))

    second = tmp_path / "run2"
    tr = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, out=str(second), tokenizer_dir=None,
                      from_dir=str(first / "model"), steps=4, log_every=2, save_every=4),
                 echo=lambda s: None)
    start = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(start[name], weights[name])  # its weights, not a fresh init
    assert tr.model.config.mask_token_id == json.loads(
        (first / "model" / "config.json").read_text())["mask_token_id"]
    tr.run()
    b = json.loads((second / "train_state.json").read_text())
    assert b["step"] == 4
    assert b["base"]["steps"] == 6 and b["base"]["tokens"] == a["tokens"] > 0
    assert b["totals"] == {"steps": 10, "tokens": a["tokens"] + b["tokens"],
                           "elapsed": a["elapsed"] + b["elapsed"]}
    # resuming the second run keeps the record it saved, even if --from now holds other weights
    (first / "model" / "train_state.json").write_text(json.dumps({**a, "step": 99}))
    tr3 = Trainer(_cfg(tmp_path, corpus_dir, bundled_dir, out=str(second), tokenizer_dir=None,
                       from_dir=str(first / "model"), steps=6, log_every=2, save_every=2),
                  echo=lambda s: None)
    assert tr3.step == 4 and tr3.base["steps"] == 6
    tr3.run()
    assert json.loads((second / "train_state.json").read_text())["totals"]["steps"] == 12
