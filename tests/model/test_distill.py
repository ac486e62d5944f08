"""Self-distillation data (clover_cli/training/distill.py): bench-shaped prompts from the training
split, the teacher's AR-mode completions, rows that score only the completion and never train
the AR layout."""
from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

SOURCE = '''"""A module."""
import os
import sys


def add(a, b):
    """Add two numbers."""
    return a + b


class Point:
    def __init__(self, x, y):
        self.x = x
'''


def test_code_prompt_is_a_def_or_class_head_ending_in_newline():
    from clover_cli.training.distill import code_prompt

    class Scripted(random.Random):
        """random() gives `coin` (whether the imports go first); the choices stay seeded."""

        def __init__(self, seed, coin):
            super().__init__(seed)
            self.coin = coin

        def random(self):
            return self.coin

    for seed in range(20):
        for coin in (0.0, 0.99):  # below the 0.25 share: behind the imports; above: the head alone
            p = code_prompt(SOURCE, Scripted(seed, coin))
            assert p is not None and p.endswith("\n")
            body = p.split("\n\n\n")[-1]
            assert body.startswith(("def add(a, b):\n", "class Point:\n")), p
            assert body in SOURCE
            assert p.startswith("import os\n") == (coin == 0.0) and (coin == 0.0 or p == body), p
    assert code_prompt("x = 1\n# no functions here\n", random.Random(0)) is None


def test_example_scores_only_the_completion(tok):
    from clover_cli.training.distill import example

    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    rec = {"prompt": "def add(a, b):\n", "completion": "    return a + b\n", "finish": "eos"}
    ex = example(tok, rec, eot)
    assert ex.ids[-1] == eot and ex.loss_ok[-1]
    scored = tok.decode([i for i, ok in zip(ex.ids[:-1], ex.loss_ok[:-1]) if ok])
    unscored = tok.decode([i for i, ok in zip(ex.ids, ex.loss_ok) if not ok])
    assert "return a + b" in scored and "def add" not in scored
    assert unscored.startswith("def add(a, b):")
    assert example(tok, dict(rec, finish="length"), eot).ids[-1] != eot


def test_source_rows_start_at_zero_and_fill_the_row(tok):
    from clover_cli.training.distill import DistillSource

    recs = [{"prompt": f"def f{i}(x):\n", "completion": f"    return x + {i}\n", "finish": "eos"}
            for i in range(5)]
    src = DistillSource(tok, recs, n=64)
    rng = random.Random(0)
    for _ in range(5):
        row = src.row(rng, 64)
        assert len(row.ids) == len(row.loss_ok) == 64
        assert tok.decode(row.ids[:3]).startswith("def f")
        assert not row.loss_ok[0] and any(row.loss_ok)
    assert src.layouts == ("bd",)
    with pytest.raises(ValueError, match="fits a row"):
        DistillSource(tok, [{"prompt": "x" * 2000, "completion": "y"}], n=64)


def test_load_rejects_a_bad_line(tmp_path):
    from clover_cli.training.distill import load

    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n\n{\"prompt\": 3}\n")
    with pytest.raises(ValueError, match=r"d.jsonl:3: not a distillation record"):
        load(f)
    with pytest.raises(ValueError, match="cannot read the distillation file"):
        load(tmp_path / "missing.jsonl")


def test_generate_writes_the_engines_ar_mode_completion(tmp_path, bundled_dir):
    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model
    from clover_cli.training import distill

    src = tmp_path / "m.py"
    src.write_text(SOURCE)
    out = tmp_path / "d.jsonl"
    assert distill.generate(str(bundled_dir), out, 3, seed=1, max_new_tokens=12,
                            files=[src]) == 3
    recs = distill.load(out)
    assert len(recs) == 3
    lm = load_model(str(bundled_dir))
    engine = Engine(lm)
    for rec in recs:
        want = engine.generate(lm.encode(rec["prompt"]), GenerationConfig(
            max_new_tokens=12, block_size=1, token_healing=True))
        assert rec["completion"] == want.text and rec["finish"] == want.finish_reason
        assert rec["file"] == str(src)


def test_distill_batches_never_use_the_ar_layout(tmp_path, bundled_dir):
    from clover_cli.training.trainer import TrainConfig, Trainer

    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"def f{i}(x):\n", "completion":
                                     f"    return x * {i}\n", "finish": "eos"}) + "\n"
                         for i in range(8)))
    cfg = TrainConfig(out=str(tmp_path / "run"), size="micro", tokenizer_dir=str(bundled_dir),
                      seq_len=64, batch_size=2, lr=1e-2, warmup=1, steps=6, log_every=3,
                      save_every=100, eval_every=1000, mix={"distill": 1.0}, ar_fraction=1.0,
                      threads=1, distill_file=str(f), real_names=0.0, vocab_names=0.0)
    said: list[str] = []
    tr = Trainer(cfg, echo=said.append)
    assert "distillation records: 8 of 8 kept (token loops left out)" in said
    kinds = {tr.micro_step()[1] for _ in range(6)}
    assert kinds == {"bd"}
    with pytest.raises(ValueError, match="--distill FILE"):
        Trainer(TrainConfig(**{**cfg.__dict__, "distill_file": None, "out": str(tmp_path / "r2")}),
                echo=lambda s: None)


@pytest.mark.slow
def test_make_distill_command(tmp_path, bundled_dir):
    from clover_cli.commands.train_cmd import train

    res = CliRunner().invoke(train, ["--make-distill", "2"])
    assert res.exit_code == 2 and "--distill FILE" in res.output
    res = CliRunner().invoke(train, ["--make-distill", "2", "--distill", str(tmp_path / "d.jsonl"),
                                     "--from", str(tmp_path / "missing")])
    assert res.exit_code == 1 and "Error" in res.output
    assert not (tmp_path / "d.jsonl").exists()


def test_token_loops_are_found_and_left_out(tok):
    from clover_cli.training.distill import DistillSource, token_loop

    assert token_loop([5, 5, 5, 5]) and not token_loop([5, 5, 5, 6])
    assert token_loop([1, 2] * 4) and not token_loop([1, 2] * 3 + [1])
    assert token_loop([7, 8, 9] * 4) and not token_loop(list(range(40)))
    line = "    return self.name\n"
    loops = {"prompt": "def f(x):\n", "completion": "    if not not not not not not x", "finish": "length"}
    lines = {"prompt": "def g(x):\n", "completion": line * 3, "finish": "length"}
    assert not token_loop(tok(line * 3, add_special_tokens=False)["input_ids"])
    src = DistillSource(tok, [loops, lines], n=64)
    assert (src.kept, src.total) == (1, 2)
    rng = random.Random(0)
    assert all("not not" not in tok.decode(src.row(rng, 64).ids) for _ in range(10))
    assert DistillSource(tok, [loops, lines], n=64, drop_loops=False).kept == 2


def test_parsing_only_keeps_the_completions_that_parse(tok, tmp_path, bundled_dir):
    from clover_cli.training.distill import DistillSource
    from clover_cli.training.trainer import TrainConfig, Trainer

    good = {"prompt": "def f(x):\n", "completion": "    return x + 1\n", "finish": "eos"}
    bad = {"prompt": "def g(x):\n", "completion": "    return (x +\n    ]\n", "finish": "length"}
    src = DistillSource(tok, [good, bad], n=64, parsing_only=True)
    assert (src.kept, src.total) == (1, 2)
    rng = random.Random(0)
    assert all("]" not in tok.decode(src.row(rng, 64).ids) for _ in range(10))
    assert DistillSource(tok, [good, bad], n=64).kept == 2
    with pytest.raises(ValueError, match="whose completion parses"):
        DistillSource(tok, [bad], n=64, parsing_only=True)
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    cfg = TrainConfig(out=str(tmp_path / "run"), size="micro", tokenizer_dir=str(bundled_dir),
                      seq_len=64, batch_size=2, steps=1, mix={"distill": 1.0}, threads=1,
                      distill_file=str(f), distill_parsing_only=True, real_names=0.0,
                      vocab_names=0.0)
    said: list[str] = []
    Trainer(cfg, echo=said.append)
    assert ("distillation records: 1 of 2 kept (token loops and completions that do not parse "
            "left out)") in said


def test_distill_filter_flags_reach_the_trainer(tmp_path, train_configs):
    from clover_cli.commands.train_cmd import train

    seen = train_configs
    base = ["--out", str(tmp_path / "run"), "--mix", "distill:1", "--distill",
            str(tmp_path / "d.jsonl"), "--no-eval"]
    for flags, want in (([], (True, False)),
                        (["--distill-keep-loops", "--distill-parsing-only"], (False, True))):
        res = CliRunner().invoke(train, base + flags)
        assert res.exit_code == 1 and "stopped by the test" in res.output, res.output
        assert (seen[-1].distill_drop_loops, seen[-1].distill_parsing_only) == want
