"""`clover swebench` end to end: local clones, worktrees, predictions, re-runs, evaluation."""
from __future__ import annotations

import json
import sys

import pytest

from modes_helpers import BUGGY, add_test_patch, clover, git, make_calc_repo, run, tool_call, write_replay

pytestmark = pytest.mark.slow


def _instance(iid, repo, base, **extra):
    return {"instance_id": iid, "repo": repo, "base_commit": base,
            "problem_statement": "add(2, 3) returns -1 instead of 5.",
            "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]),
            "PASS_TO_PASS": json.dumps([]),  # officially only the test_patch's files run
            "test_patch": add_test_patch(), "version": "0.1", **extra}


@pytest.fixture
def batch(tmp_path):
    repos = tmp_path / "repos"
    bases = {name: make_calc_repo(repos / f"acme__{name}", with_test=False) for name in ("alpha", "beta")}
    later = repos / "acme__alpha"
    (later / "calc.py").write_text(BUGGY + "\n# a later commit\n")
    git(later, "commit", "-qam", "later work")                      # HEAD is past base_commit
    lines = [json.dumps(_instance("acme__alpha-1", "acme/alpha", bases["alpha"])),
             "{this line is not json",
             json.dumps(_instance("acme__gone-1", "acme/gone", bases["alpha"])),
             json.dumps(_instance("acme__beta-1", "acme/beta", bases["beta"])),
             json.dumps(_instance("acme__beta-2", "acme/beta", "f" * 40))]
    instances = tmp_path / "instances.jsonl"
    instances.write_text("\n".join(lines) + "\n")
    fixer = write_replay(tmp_path / "fix.json", [
        "Looking at add(). " + tool_call("edit_file", path="calc.py", old="return a - b", new="return a + b"),
        "add() now returns the sum."])
    idle = write_replay(tmp_path / "idle.json", ["Nothing to change."])
    return tmp_path, repos, bases, instances, fixer, idle


def _preds(path):
    return {row["instance_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_batch_predictions_apply_and_resolve_and_errors_do_not_stop_it(batch):
    tmp, repos, bases, instances, fixer, _ = batch
    out = tmp / "out" / "preds.jsonl"
    proc = clover("swebench", "--instances", str(instances), "--output", str(out), "--model", f"replay:{fixer}",
                  "--repos-dir", str(repos), "--workdir", str(tmp / "work"), "--workers", "2", "--evaluate",
                  "--python", sys.executable,
                  cwd=tmp, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr             # some instances were broken
    preds = _preds(out)
    assert sorted(preds) == ["acme__alpha-1", "acme__beta-1"]
    for iid, name in (("acme__alpha-1", "alpha"), ("acme__beta-1", "beta")):
        row = preds[iid]
        assert set(row) == {"instance_id", "model_name_or_path", "model_patch"}
        assert row["model_name_or_path"] == "clover/replay:fix.json"
        assert "+    return a + b" in row["model_patch"] and ".clover" not in row["model_patch"]
        check = tmp / f"check-{name}"
        run(["git", "clone", "-q", str(repos / f"acme__{name}"), str(check)], tmp)
        git(check, "checkout", "-q", bases[name])
        (tmp / f"{name}.patch").write_text(row["model_patch"])
        run(["git", "apply", str(tmp / f"{name}.patch")], check)
        assert "return a + b" in (check / "calc.py").read_text()

    report = json.loads((tmp / "out" / "preds.report.json").read_text())
    inst = report["instances"]
    assert inst["acme__alpha-1"]["status"] == "done" and inst["acme__alpha-1"]["evaluation"]["resolved"] is True
    assert inst["acme__beta-1"]["evaluation"]["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_add.py::test_add"]
    assert inst["acme__beta-1"]["evaluation"]["verdict"] == "resolved"
    assert "clone not found" in inst["acme__gone-1"]["error"]
    assert "not found in" in inst["acme__beta-2"]["error"]
    assert "not valid JSON" in inst["line 2"]["error"]
    assert report["totals"] == {"instances": 5, "done": 2, "skipped": 0, "errors": 3, "empty_patches": 0,
                                "evaluated": 2, "resolved": 2, "unresolved": 0, "eval_errors": 0}
    assert "resolved 2/2 evaluated" in proc.stdout and "official grading rules" in proc.stdout
    assert "resolved 2, unresolved 0, error 3 of 5" in proc.stderr        # the verdict table
    assert "5/5 ok 2 err 3 skip 0 run 0" in proc.stderr                 # the progress line

    traj = tmp / "out" / "preds.trajectories" / "acme__alpha-1.jsonl"
    records = [json.loads(ln) for ln in traj.read_text().splitlines()]
    assert records[0]["type"] == "meta" and records[0]["instance_id"] == "acme__alpha-1"
    assert "edit_file" in traj.read_text()
    for name in ("alpha", "beta"):                                       # clones untouched, worktrees gone
        clone = repos / f"acme__{name}"
        assert git(clone, "status", "--porcelain") == ""
        assert len(git(clone, "worktree", "list").splitlines()) == 1
    assert not any((tmp / "work").iterdir())


def test_rerun_skips_finished_and_redo_redoes(batch):
    tmp, repos, bases, instances, fixer, idle = batch
    out = tmp / "preds.jsonl"
    common = ["swebench", "--instances", str(instances), "--output", str(out), "--repos-dir", str(repos),
              "--instance-ids", "acme__alpha-1,acme__beta-1"]
    first = clover(*common, "--model", f"replay:{fixer}", cwd=tmp, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    before = out.read_text()
    again = clover(*common, "--model", f"replay:{idle}", "--evaluate", "--python", sys.executable,
                   cwd=tmp, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert out.read_text() == before                                    # nothing re-run
    report = json.loads((tmp / "preds.report.json").read_text())
    assert {k: v["status"] for k, v in report["instances"].items()} == {"acme__alpha-1": "skipped",
                                                                       "acme__beta-1": "skipped"}
    assert report["totals"]["resolved"] == 2                            # evaluating old predictions works
    redo = clover(*common[:-1], "acme__beta-1", "--model", f"replay:{idle}", "--redo", cwd=tmp, timeout=300)
    assert redo.returncode == 0, redo.stdout + redo.stderr
    preds = _preds(out)
    assert preds["acme__beta-1"]["model_patch"] == ""                    # the idle agent changed nothing
    assert "+    return a + b" in preds["acme__alpha-1"]["model_patch"]  # kept
    assert "empty patches 1" in redo.stdout
    report = json.loads((tmp / "preds.report.json").read_text())          # alpha-1 was not in this run:
    assert report["instances"]["acme__alpha-1"]["status"] == "skipped"    # its entry is kept, like its prediction
    assert report["instances"]["acme__alpha-1"]["evaluation"]["resolved"] is True
    assert report["instances"]["acme__beta-1"]["status"] == "done"
    assert report["totals"]["instances"] == 2 and report["run_totals"]["instances"] == 1
    assert "keeps 1 earlier instance(s)" in redo.stdout

    (repos / "acme__beta").rename(tmp / "beta-moved")                  # a clone gone after the run
    gone = clover(*common, "--model", f"replay:{idle}", "--evaluate", "--python", sys.executable,
                   cwd=tmp, timeout=300)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    entry = json.loads((tmp / "preds.report.json").read_text())["instances"]["acme__beta-1"]
    assert entry["status"] == "skipped" and "clone not found" in entry["evaluation"]["error"]
    assert _preds(out) == preds

    bad = clover("swebench", "--instances", str(tmp / "missing.jsonl"), "--output", str(out),
                 "--repos-dir", str(repos), "--model", f"replay:{idle}", cwd=tmp)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        f"clover swebench: error: instances file not found: {tmp / 'missing.jsonl'}"]
    assert _preds(out) == preds                                          # untouched
