"""Real names in copy and call data: harvested from the training split's packages, never from
held-out repositories, mixed in at the configured share, and absent (data unchanged) when off."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from clover_cli.training import curriculum, names, transcripts


def _pkg(root: Path, name: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


@pytest.fixture()
def roots(tmp_path):
    root = tmp_path / "site"
    _pkg(root, "shopping", {  # a training-split name (is_heldout_repo False)
        "__init__.py": "",
        "inventory.py": "def restock_shelf(n):\n    return n\n\nclass ShelfLabel:\n    pass\n",
        "deep/er/still/mod.py": "async def deeply_nested_helper():\n    pass\n",
        "util/prices.py": "    def apply_discount(self):\n        pass\n",
    })
    _pkg(root, "secretpkg", {"__init__.py": "", "hidden.py": "def held_out_name():\n    pass\n"})
    (root / "toplevel_script.py").write_text("def not_in_a_package():\n    pass\n")
    return root


def test_harvest_finds_definitions_and_package_relative_paths(roots):
    real = names.harvest([roots], exclude_repo=lambda n: n == "secretpkg")
    assert {"restock_shelf", "ShelfLabel", "deeply_nested_helper", "apply_discount"} <= set(
        real.identifiers)
    # files relative to their package (the repository root, as read_file sees it); at most 3
    # parts deep, as users type them
    assert {"inventory.py", "util/prices.py"} <= set(real.modules)
    assert "__init__.py" not in real.modules  # empty files are not in the corpus
    assert "deep/er/still/mod.py" not in real.modules
    assert "util" in real.dirs and "deep/er/still" in real.dirs
    # the held-out repository and files outside any package contribute nothing
    assert "held_out_name" not in real.identifiers and "hidden.py" not in real.modules
    assert "not_in_a_package" not in real.identifiers


def test_harvest_excludes_the_transcripts_heldout_repositories(tmp_path):
    root = tmp_path / "site"
    held = [f"pkg{i}" for i in range(60) if transcripts.is_heldout_repo(f"pkg{i}")]
    kept = [f"pkg{i}" for i in range(60) if not transcripts.is_heldout_repo(f"pkg{i}")]
    assert held and kept
    for name in held + kept:
        _pkg(root, name, {"__init__.py": "", "m.py": f"def fn_of_{name}():\n    pass\n"})
    real = names.harvest([root], exclude_repo=transcripts.is_heldout_repo)
    from clover_cli.training import corpus

    # the code corpus's own held-out files (2% by path) stay out too
    want = {f"fn_of_{n}" for n in kept if not corpus.is_heldout(f"{n}/m.py")}
    assert len(want) > 30 and want == set(real.identifiers)


def test_thing_draws_each_kind_and_falls_back_to_synthetic():
    real = names.RealNames(("restock_shelf",), ("shop/inventory.py",), ())
    rng = random.Random(0)
    assert real.thing(rng, "name") == "restock_shelf"
    assert real.thing(rng, "file") == "shop/inventory.py"
    assert real.thing(rng, "dir")  # no real dirs: a synthetic one
    assert not names.RealNames((), (), ())


def test_copy_data_mixes_real_names_at_the_share(tok):
    real = names.RealNames(("restock_shelf",), ("shop/inventory.py",), ("shop",), share=0.5)
    src = curriculum.DenseCopySource(tok, 256, real)
    rng = random.Random(0)
    text = "".join(tok.decode(src.row(rng, 256).ids) for _ in range(10))
    n_real = sum(text.count(x) for x in ("restock_shelf", "shop/inventory.py"))
    assert n_real > 20
    none = curriculum.DenseCopySource(tok, 256, names.RealNames(
        ("restock_shelf",), ("shop/inventory.py",), ("shop",), share=0.0))
    text0 = "".join(tok.decode(none.row(random.Random(0), 256).ids) for _ in range(10))
    assert "restock_shelf" not in text0 and "shop/inventory.py" not in text0
    chat = "".join(curriculum.curriculum_chat(rng, tok, real) for _ in range(20))
    assert "restock_shelf" in chat or "shop/inventory.py" in chat


def test_calls_use_real_names_and_synthetic_eval_set_is_unchanged(tok):
    real = names.RealNames(("restock_shelf",), ("shop/inventory.py",), ("shop",), share=1.0)
    rng = random.Random(1)
    for _ in range(10):
        text = transcripts.synthetic_call_chat(rng, tok, real=real)
        assert any(x in text for x in ('"restock_shelf', ' restock_shelf"', '"shop/inventory.py"',
                                       '"shop"')), text
    # without a pool the data is what it was before real names existed: the trainer's and the
    # card's synthetic-call evaluation (seed 4242, the original phrasings: wide=False, as
    # call_prompts draws it) keeps measuring the same prompts
    rng = random.Random(4242)
    users = [transcripts.synthetic_call_chat(rng, tok, wide=False).split("<|im_start|>user\n")[1]
             .split("<|im_end|>")[0] for _ in range(3)]
    assert users == ["List the files in set", "print the contents of nef/request/table_zefelgri.py",
                     "ls value"]


def test_trainer_pool_follows_the_config(tmp_path, roots, tok):
    from clover_cli.training.trainer import TrainConfig, _real_names

    cfg = TrainConfig(out=str(tmp_path / "r"), code_root=str(roots), real_names=0.3,
                      vocab_names=0.2)
    said: list[str] = []
    pool = _real_names(cfg, tok, "train", said.append)
    assert pool is not None and pool.share == 0.5 and "restock_shelf" in pool.identifiers
    assert pool.word_share == pytest.approx(0.4) and len(pool.words) > 1000
    assert said and "30% real" in said[0] and "identifiers" in said[0]
    assert "20% built from" in said[0]
    # a code root without packages: said so, and the data stay synthetic
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "m.py").write_text("def f():\n    pass\n")
    said.clear()
    assert _real_names(TrainConfig(out=str(tmp_path / "r"), code_root=str(flat),
                                   vocab_names=0.0), tok, "train", said.append) is None
    assert "none found" in said[0]
    # vocabulary names alone need no harvest
    only = _real_names(TrainConfig(out=str(tmp_path / "r"), code_root=str(flat), real_names=0.0,
                                   vocab_names=0.5), tok, "train")
    assert only is not None and only.word_share == 1.0 and not only.identifiers
    assert _real_names(cfg, tok, "eval") is None
    off = TrainConfig(out=str(tmp_path / "r"), code_root=str(roots), real_names=0.0,
                      vocab_names=0.0)
    assert _real_names(off, tok, "train") is None
    with pytest.raises(ValueError, match="real_names"):
        TrainConfig(out=str(tmp_path / "r"), real_names=1.5)
    with pytest.raises(ValueError, match="sum <= 1"):
        TrainConfig(out=str(tmp_path / "r"), real_names=0.7, vocab_names=0.4)


def test_cli_rejects_a_bad_share(tmp_path):
    from click.testing import CliRunner

    from clover_cli.commands.train_cmd import train

    res = CliRunner().invoke(train, ["--out", str(tmp_path / "r"), "--real-names", "2"])
    assert res.exit_code != 0 and "real_names and vocab_names must be in [0, 1]" in res.output


def test_harvest_caps_files_per_package(tmp_path):
    root = tmp_path / "site"
    _pkg(root, "bigpkg", {"__init__.py": "", **{f"m{i}.py": f"def big_{i}():\n    pass\n"
                                                 for i in range(50)}})
    _pkg(root, "smallpkg", {"__init__.py": "", "a.py": "def small_one():\n    pass\n"})
    real = names.harvest([root], per_package=5)
    assert sum(n.startswith("big_") for n in real.identifiers) == 5
    assert "small_one" in real.identifiers
