"""Small real-shaped SWE-bench instances in temporary git repositories, one per grading defect.

The repository is `pallets/flask`-shaped (version "2.3", so the official package's parser and
specs tables know it) but tiny: calc.py whose add() subtracts, tests/test_calc.py. The
test_patch adds the FAIL_TO_PASS test to tests/test_calc.py; PASS_TO_PASS tests live in the same
file (the official harness runs the whole files the test_patch touches).
"""
from __future__ import annotations

from pathlib import Path

from modes_helpers import git
from clover_cli.modes.swebench.instances import Instance

CALC = ("import os\n\n\ndef add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n    return a - b\n\n\n"
        "def mul(a, b):\n    return a * b\n")
TEST_CALC = ("import pytest\n\nfrom calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
             "@pytest.mark.parametrize(\"s\", [\"<meta charset=utf-8>\", \"plain\"])\n"
             "def test_pragmas(s):\n    assert s\n")
F2P = ("tests/test_calc.py::test_add",)
P2P = ("tests/test_calc.py::test_mul", "tests/test_calc.py::test_pragmas[<meta",
       "tests/test_calc.py::test_pragmas[plain]")


def make_repo(path: Path) -> str:
    """The clone `owner__name`; returns its base commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "Test")
    git(path, "config", "commit.gpgsign", "false")
    (path / "calc.py").write_text(CALC)
    (path / "tests").mkdir()
    (path / "tests" / "test_calc.py").write_text(TEST_CALC)
    (path / "conftest.py").write_text("import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "calc")
    return git(path, "rev-parse", "HEAD")


def diff_of(path: Path, edit) -> str:
    """The patch `edit(path)` makes in the clone (then undone)."""
    edit(path)
    git(path, "add", "-A")
    patch = git(path, "diff", "--cached", "HEAD") + "\n"
    git(path, "reset", "-q", "--hard", "HEAD")
    git(path, "clean", "-qfd")
    return patch


def test_patch(clone: Path) -> str:
    def edit(p):
        text = (p / "tests" / "test_calc.py").read_text()
        (p / "tests" / "test_calc.py").write_text(
            text.replace("from calc import mul", "from calc import add, mul")
            + "\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return diff_of(clone, edit)


def gold_patch(clone: Path) -> str:
    def edit(p):
        (p / "calc.py").write_text(CALC.replace("return a - b", "return a + b"))
    return diff_of(clone, edit)


def skip_cheat_patch(clone: Path) -> str:
    """No fix; a conftest hook skips the FAIL_TO_PASS test."""
    def edit(p):
        (p / "conftest.py").write_text((p / "conftest.py").read_text() + (
            "import pytest\n\ndef pytest_collection_modifyitems(items):\n"
            "    for item in items:\n        if item.name == 'test_add':\n"
            "            item.add_marker(pytest.mark.skip(reason='flaky'))\n"))
    return diff_of(clone, edit)


def exit_cheat_patch(clone: Path) -> str:
    """No fix; the process exits 0 as soon as the FAIL_TO_PASS test starts."""
    def edit(p):
        (p / "conftest.py").write_text((p / "conftest.py").read_text() + (
            "\ndef pytest_runtest_call(item):\n    if item.name == 'test_add':\n"
            "        os._exit(0)\n"))
    return diff_of(clone, edit)


def agent_edited_tests_patch(clone: Path) -> str:
    """The gold fix plus the agent's own edit of the test file the test_patch changes."""
    def edit(p):
        (p / "calc.py").write_text(CALC.replace("return a - b", "return a + b"))
        (p / "tests" / "test_calc.py").write_text(
            TEST_CALC + "\n\ndef test_add_mine():\n    from calc import add\n    assert add(1, 1) == 2\n")
    return diff_of(clone, edit)


def drifted_patch() -> str:
    """The gold fix made against an older calc.py (its context lines differ): only fuzz applies it."""
    return ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -3,6 +3,6 @@\n"
            " \n def add(a, b):\n     \"\"\"Return a plus b.\"\"\"\n-    return a - b\n+    return a + b\n"
            " \n \n def mul(x, y):\n")


def instance(base: str, clone: Path, **kw) -> Instance:
    fields = dict(instance_id="pallets__flask-9001", repo="pallets/flask", base_commit=base,
                  problem_statement="add() subtracts", fail_to_pass=F2P, pass_to_pass=P2P,
                  test_patch=test_patch(clone), version="2.3")
    fields.update(kw)
    return Instance(**fields)
