"""Worktrees at a base commit from local clones, patches that apply, atomic predictions."""
from __future__ import annotations

import json
import threading

import pytest

from modes_helpers import FIXED, git, make_calc_repo, run
from clover_cli.modes.swebench.predictions import PredictionsFile
from clover_cli.modes.worktree import (WorktreeError, add_worktree, apply_patch, diff_worktree,
                                       find_clone, remove_worktree)


def test_worktree_diff_applies_to_base_and_excludes_clover(tmp_path):
    clone = tmp_path / "repos" / "o__calc"
    base = make_calc_repo(clone)
    (clone / "later.txt").write_text("a later commit\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "later")
    assert find_clone(tmp_path / "repos", "o__calc") == clone
    tree = add_worktree(clone, base[:10], tmp_path / "work" / "i1")
    assert not (tree / "later.txt").exists()           # at base_commit, not HEAD
    assert git(tree, "rev-parse", "HEAD") == base
    (tree / "calc.py").write_text(FIXED)
    (tree / "new_module.py").write_text("X = 1\n")
    (tree / "tests" / "test_mul.py").unlink()
    (tree / ".clover" / "checkpoints").mkdir(parents=True)
    (tree / ".clover" / "checkpoints" / "c1").write_text("junk")
    patch = diff_worktree(tree, base)
    assert "new_module.py" in patch and "return a + b" in patch and "test_mul.py" in patch
    assert ".clover" not in patch
    remove_worktree(clone, tree)
    assert not tree.exists()
    assert "i1" not in git(clone, "worktree", "list")
    # the patch applies cleanly to a fresh checkout of base_commit
    tree2 = add_worktree(clone, base, tmp_path / "work" / "i2")
    assert apply_patch(tree2, patch) == (True, "patch applied")
    assert (tree2 / "calc.py").read_text() == FIXED
    assert (tree2 / "new_module.py").read_text() == "X = 1\n"
    ok, msg = apply_patch(tree2, patch)                  # twice: does not apply
    assert not ok and "did not apply" in msg
    remove_worktree(clone, tree2)
    assert git(clone, "status", "--porcelain") == ""     # the user's clone is untouched


def test_missing_clone_and_commit(tmp_path):
    with pytest.raises(WorktreeError, match="clone not found"):
        find_clone(tmp_path, "o__missing")
    (tmp_path / "o__plain").mkdir()
    with pytest.raises(WorktreeError, match="not a git repository"):
        find_clone(tmp_path, "o__plain")
    clone = tmp_path / "o__calc"
    make_calc_repo(clone)
    with pytest.raises(WorktreeError, match="not found in"):
        add_worktree(clone, "0123456789abcdef0123456789abcdef01234567", tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_predictions_file_atomic_and_tolerant(tmp_path):
    out = tmp_path / "preds.jsonl"
    out.write_text(json.dumps({"instance_id": "a", "model_name_or_path": "m", "model_patch": "p"})
                   + "\n{torn line\n")
    preds = PredictionsFile(out)
    assert preds.ids() == ["a"] and preds.unreadable_lines == [2]
    assert (tmp_path / "preds.jsonl.bak").read_text().endswith("{torn line\n")   # nothing lost

    def put(i):
        preds.put(f"id{i}", "m", f"patch {i}\n")

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert {r["instance_id"] for r in rows} == {"a"} | {f"id{i}" for i in range(8)}
    assert all(set(r) == {"instance_id", "model_name_or_path", "model_patch"} for r in rows)
    preds.put("a", "m2", "new")
    assert PredictionsFile(out).get("a") == {"instance_id": "a", "model_name_or_path": "m2",
                                              "model_patch": "new"}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
