"""Local evaluation: fresh worktree, model patch + test_patch, FAIL_TO_PASS / PASS_TO_PASS."""
from __future__ import annotations

import sys

from modes_helpers import BUGGY, FIXED, add_test_patch, make_calc_repo
from clover_cli.modes.evaluate import evaluate_prediction, run_test_ids
from clover_cli.modes.instances import Instance

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider {{tests}}"


def _fix_patch() -> str:
    return ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,6 +1,6 @@\n"
            " def add(a, b):\n     \"\"\"Sum of a and b.\"\"\"\n-    return a - b\n+    return a + b\n"
            " \n \n def mul(a, b):\n")


def _instance(base: str, **kw) -> Instance:
    fields = dict(instance_id="o__calc-1", repo="o/calc", base_commit=base, problem_statement="add",
                  fail_to_pass=("tests/test_add.py::test_add",),
                  pass_to_pass=("tests/test_mul.py::test_mul",), test_patch=add_test_patch())
    fields.update(kw)
    return Instance(**fields)


def test_resolved_unresolved_and_broken_patches(tmp_path):
    clone = tmp_path / "o__calc"
    base = make_calc_repo(clone, with_test=False)
    inst = _instance(base)
    good = evaluate_prediction(clone, inst, _fix_patch(), tmp_path / "e1", PYTEST)
    assert good["resolved"] is True and good["patch_applied"] is True
    assert good["tests_status"]["FAIL_TO_PASS"] == {"success": ["tests/test_add.py::test_add"], "failure": []}
    assert good["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_mul.py::test_mul"]
    assert not (tmp_path / "e1").exists()                 # worktree removed

    empty = evaluate_prediction(clone, inst, "", tmp_path / "e2", PYTEST)
    assert empty["resolved"] is False
    assert empty["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_add.py::test_add"]

    broken = evaluate_prediction(clone, inst, _fix_patch().replace("a - b", "a * b"), tmp_path / "e3", PYTEST)
    assert broken["resolved"] is False and broken["patch_applied"] is False
    assert "model patch did not apply" in broken["error"]

    none = evaluate_prediction(clone, _instance(base, fail_to_pass=()), _fix_patch(), tmp_path / "e4", PYTEST)
    assert none["resolved"] is False and "no FAIL_TO_PASS" in none["error"]
    assert (clone / "calc.py").read_text() == BUGGY     # the clone itself never changes


def test_run_test_ids_handles_unknown_ids_and_non_pytest_commands(tmp_path):
    clone = tmp_path / "o__calc"
    make_calc_repo(clone)
    (clone / "calc.py").write_text(FIXED)
    ids = ["tests/test_add.py::test_add", "tests/test_mul.py::test_nope", "tests/test_mul.py::test_mul"]
    # pytest refuses the whole batch for the unknown id; the others are re-run one by one
    assert run_test_ids(PYTEST, ids, clone) == {"tests/test_add.py::test_add": "PASSED",
                                                 "tests/test_mul.py::test_nope": "FAILED",
                                                 "tests/test_mul.py::test_mul": "PASSED"}
    script = f"{sys.executable} -c \"import sys; sys.exit(0 if sys.argv[1] == 'good' else 1)\" {{test}}"
    assert run_test_ids(script, ["good", "bad"], clone) == {"good": "PASSED", "bad": "FAILED"}
