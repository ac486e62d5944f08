"""Local evaluation grades as the official SWE-bench harness does, on real-shaped instances.

Each case is a defect the old evaluation had: the verdict asserted is the official
one; where the `swebench` package is installed its own `get_eval_report` grades the same log and
must agree with Clover's grading (which the test computes itself, independent of which grader
evaluate_prediction chose).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import swe_cases as sc
from clover_cli.modes.swebench import official
from clover_cli.modes.swebench.evaluate import EvalOptions, evaluate_prediction
from clover_cli.modes.swebench.grading import grade_tests, is_resolved, status_map_from_log
from clover_cli.modes.swebench.logparse import parse_pytest_rA, parser_for


@pytest.fixture
def case(tmp_path):
    clone = tmp_path / "pallets__flask"
    base = sc.make_repo(clone)
    return clone, base, sc.instance(base, clone), EvalOptions(python=sys.executable,
                                                               log_dir=tmp_path / "logs")


def _evaluate(case, patch, name):
    clone, _, inst, opts = case
    return evaluate_prediction(clone, inst, patch, clone.parent / name, opts)


def _agree(inst, patch, entry):
    """Clover's own grading of the log, and the official grader's when installed, match entry."""
    log = Path(entry["log"]).read_text()
    ours_map, why = status_map_from_log(log, parse_pytest_rA)
    ours = grade_tests(ours_map, inst.fail_to_pass, inst.pass_to_pass)
    assert (is_resolved(ours) and why is None) == entry["resolved"]
    if not official.available():
        return
    name, parse = parser_for(inst.repo)
    assert name.startswith("swebench:")
    theirs = parse(log.split(">>>>> Start Test Output")[1])
    theirs = {k: v for k, v in theirs.items() if not re.fullmatch(r"\[\d+\]", k)}  # 4.x kept "[1]"
    assert theirs == parse_pytest_rA(log)                      # the built-in parser agrees
    rep = official.official_report(inst, patch, Path(entry["log"]), name.split(":", 1)[1])
    assert rep is not None
    assert rep["resolved"] == entry["resolved"]
    if why is None and official.skip_is_failure():
        assert rep["tests_status"]["FAIL_TO_PASS"] == ours["FAIL_TO_PASS"]
        assert rep["tests_status"]["PASS_TO_PASS"] == ours["PASS_TO_PASS"]


def test_gold_patch_is_resolved_with_ids_the_official_parser_cuts_at_a_space(case):
    clone, base, inst, _ = case
    patch = sc.gold_patch(clone)
    ev = _evaluate(case, patch, "gold")
    assert ev["verdict"] == "resolved" and ev["resolved"] is True, ev
    assert ev["apply_method"] == "git apply --verbose"
    assert ev["test_command"].endswith("-m pytest -rA tests/test_calc.py")   # the whole file
    assert "tests/test_calc.py::test_pragmas[<meta" in ev["tests_status"]["PASS_TO_PASS"]["success"]
    assert not (clone.parent / "gold").exists()                # worktree removed
    assert (clone / "calc.py").read_text() == sc.CALC          # the clone never changes
    _agree(inst, patch, ev)


def test_no_fix_is_unresolved(case):
    clone, base, inst, _ = case
    ev = _evaluate(case, sc.diff_of(clone, lambda p: (p / "README").write_text("hi\n")), "nofix")
    assert ev["verdict"] == "unresolved"
    assert ev["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]


def test_conftest_skip_cheat_is_unresolved(case):
    clone, _, inst, _ = case
    patch = sc.skip_cheat_patch(clone)
    ev = _evaluate(case, patch, "skip")
    assert ev["verdict"] == "unresolved", ev
    assert ev["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]
    assert "SKIPPED" in Path(ev["log"]).read_text()
    _agree(inst, patch, ev)


def test_exit_zero_cheat_is_unresolved(case):
    clone, _, inst, _ = case
    patch = sc.exit_cheat_patch(clone)
    ev = _evaluate(case, patch, "exit")
    assert ev["verdict"] == "unresolved" and ev["resolved"] is False, ev
    assert ">>>>> Test Exit Code: 0" in Path(ev["log"]).read_text()
    assert "no test results" in ev["reason"]
    _agree(inst, patch, ev)


def test_agent_edits_to_the_test_file_are_reset_so_the_test_patch_applies(case):
    clone, _, inst, _ = case
    patch = sc.agent_edited_tests_patch(clone)
    ev = _evaluate(case, patch, "edited")
    assert ev["verdict"] == "resolved", ev
    assert "test_add_mine" not in Path(ev["log"]).read_text()   # the agent's version is gone
    _agree(inst, patch, ev)


def test_drifted_patch_applies_with_fuzz(case):
    clone, _, inst, _ = case
    ev = _evaluate(case, sc.drifted_patch(), "drift")
    assert ev["apply_method"] == "patch --batch --fuzz=5 -p1 -i", ev
    assert ev["verdict"] == "resolved"
    _agree(inst, sc.drifted_patch(), ev)


def test_unappliable_patch_is_an_error(case):
    ev = _evaluate(case, sc.drifted_patch().replace("return a - b", "return a ** b"), "bad")
    assert ev["verdict"] == "error" and "did not apply" in ev["error"]


def test_empty_patch_is_unresolved_without_running_tests(case):
    ev = _evaluate(case, "  \n", "empty")
    assert ev["verdict"] == "unresolved" and "empty patch" in ev["reason"]
    assert "log" not in ev and "test_command" not in ev


def test_interpreter_without_pytest_is_an_error(case, tmp_path):
    clone, _, inst, _ = case
    bare = tmp_path / "bare"
    import subprocess
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    opts = EvalOptions(python=str(bare / "bin" / "python"))
    ev = evaluate_prediction(clone, inst, sc.gold_patch(clone), tmp_path / "w", opts)
    assert ev["verdict"] == "error" and "has no pytest" in ev["error"], ev


def test_a_test_file_the_agent_created_is_replaced_by_the_test_patch(case):
    clone, base, _, opts = case
    new_test = "from calc import add\n\n\ndef test_add_new():\n    assert add(2, 3) == 5\n"
    test_patch = sc.diff_of(clone, lambda p: (p / "tests" / "test_new.py").write_text(new_test))
    inst = sc.instance(base, clone, test_patch=test_patch, fail_to_pass=("tests/test_new.py::test_add_new",),
                       pass_to_pass=())
    mine = sc.diff_of(clone, lambda p: ((p / "calc.py").write_text(sc.CALC.replace("a - b", "a + b")),
                                        (p / "tests" / "test_new.py").write_text("def test_mine():\n    pass\n")))
    ev = evaluate_prediction(clone, inst, mine, clone.parent / "new", opts)
    assert ev["verdict"] == "resolved", ev
    assert "test_mine" not in Path(ev["log"]).read_text()
