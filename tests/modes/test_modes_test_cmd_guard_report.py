"""Test commands, output trimming, the test-file guard, progress line and batch report."""
from __future__ import annotations

import io
import json
import sys

import pytest

from clover_cli.modes.swebench.progress import Progress, format_elapsed
from clover_cli.modes.swebench.report import BatchReport, report_path, trajectories_dir
from clover_cli.modes.fix.testguard import TestFileGuard, protected_test_paths
from clover_cli.modes.fix.testrun import (TestCommandError, build_argv, is_pytest, parse_pytest_summary,
                                      project_test_cmd, trim_output)
from clover_cli.trust import TrustStore


def test_build_argv_placeholders():
    argv = build_argv("python -m pytest -x -q {test}", ["tests/t.py::test_a[x y]"])
    assert argv[1:] == ["-m", "pytest", "-x", "-q", "tests/t.py::test_a[x y]"]
    assert argv[0].endswith(("python", "python3")) or argv[0] == sys.executable
    assert build_argv("pytest -q {test}", ['-k "add or mul"'])[2:] == ["-k", "add or mul"]
    assert build_argv("make test", ["t1"]) == ["make", "test", "t1"]        # appended when no placeholder
    assert build_argv("tox -- {tests}", ["a", "b"]) == ["tox", "--", "a", "b"]
    assert build_argv("sh -c 'run {test}'", ["a"]) == ["sh", "-c", "run a"]
    assert is_pytest(build_argv("python -m pytest {test}", ["a"])) and is_pytest(["pytest", "a"])
    assert not is_pytest(["make", "test"])
    with pytest.raises(TestCommandError):
        build_argv("pytest 'unclosed", ["a"])
    with pytest.raises(TestCommandError):
        build_argv("   ", ["a"])


def test_project_test_cmd(tmp_path):
    assert project_test_cmd(tmp_path) is None
    (tmp_path / ".clover").mkdir()
    (tmp_path / ".clover" / "config.toml").write_text('test_cmd = "tox -e py -- {test}"\n')
    assert project_test_cmd(tmp_path) is None  # an untrusted repository's command never runs
    TrustStore().set(tmp_path, True)
    assert project_test_cmd(tmp_path) == "tox -e py -- {test}"
    (tmp_path / ".clover" / "config.toml").write_text('test_cmd = [\n')
    with pytest.raises(TestCommandError, match="not valid TOML"):
        project_test_cmd(tmp_path)


def test_trim_and_summary():
    text = "HEAD" + "x" * 10000 + "TAIL"
    out = trim_output(text, 1000, 200)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "characters cut" in out and len(out) < 1100
    assert trim_output("short") == "short"
    summary = ("=== short test summary info ===\nPASSED t.py::test_a\nFAILED t.py::test_b - assert 1 == 2\n"
               "ERROR t.py::test_b - teardown\nXFAIL t.py::test_c - reason\nSKIPPED [1] t.py:3: skip\n")
    assert parse_pytest_summary(summary) == {"t.py::test_a": "PASSED", "t.py::test_b": "FAILED",
                                             "t.py::test_c": "XFAIL"}


def test_protected_paths_and_guard(calc_repo):
    repo, _ = calc_repo
    configs = ["pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"]
    tests_dir = ["tests/conftest.py"] + [f"tests/{c}" for c in configs]
    assert protected_test_paths("tests/test_add.py::test_add", repo) == [
        "tests/test_add.py", *tests_dir, "conftest.py", *configs]
    assert protected_test_paths("tests", repo) == ["tests", *tests_dir, "conftest.py", *configs]
    every = ["conftest.py", "tests/test_add.py", "tests/test_mul.py", *configs]
    assert protected_test_paths("-k add", repo) == every
    assert protected_test_paths("../outside.py", repo) == every
    guard = TestFileGuard(repo, protected_test_paths("tests/test_add.py", repo))
    original = (repo / "tests" / "test_add.py").read_bytes()
    (repo / "tests" / "test_add.py").write_text("def test_add():\n    pass\n")
    (repo / "tests" / "conftest.py").write_text("collect_ignore = ['test_add.py']\n")
    (repo / "calc.py").write_text("changed\n")                     # not protected: stays
    (repo / "setup.cfg").write_text("[tool:pytest]\naddopts = --collect-only\n")
    assert guard.restore() == ["setup.cfg", "tests/conftest.py", "tests/test_add.py"]
    assert not (repo / "setup.cfg").exists()
    assert (repo / "tests" / "test_add.py").read_bytes() == original
    assert not (repo / "tests" / "conftest.py").exists()
    assert (repo / "calc.py").read_text() == "changed\n"
    (repo / "tests" / "test_add.py").unlink()
    assert guard.restore() == ["tests/test_add.py"] and (repo / "tests" / "test_add.py").read_bytes() == original
    dir_guard = TestFileGuard(repo, ["tests"])
    (repo / "tests" / "test_new.py").write_text("x")
    (repo / "tests" / "__pycache__").mkdir()
    (repo / "tests" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert dir_guard.restore() == ["tests/test_new.py"]


def test_progress_line():
    now = [100.0]
    stream = io.StringIO()
    prog = Progress(4, stream=stream, width=8, clock=lambda: now[0])
    prog.finish("error", "bad line", was_running=False)
    prog.start("a")
    now[0] = 3725.0
    prog.finish("done", "a")
    prog.start("b")
    prog.finish("skipped", "b")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[##------] 1/4 ok 0 err 1 skip 0 run 0 0:00:00 bad line"
    assert lines[1] == "[##------] 1/4 ok 0 err 1 skip 0 run 1 0:00:00 a"
    assert lines[2] == "[####----] 2/4 ok 1 err 1 skip 0 run 0 1:00:25 a"
    assert lines[-1] == "[######--] 3/4 ok 1 err 1 skip 1 run 0 1:00:25 b"
    assert format_elapsed(59.9) == "0:00:59"


def test_report_totals_and_summary(tmp_path):
    out = tmp_path / "preds.jsonl"
    assert report_path(out).name == "preds.report.json"
    assert trajectories_dir(out).name == "preds.trajectories"
    rep = BatchReport(report_path(out), {"evaluate": True})
    rep.set("a", {"status": "done", "patch_lines": 2, "evaluation": {"resolved": True}})
    rep.set("b", {"status": "skipped", "patch_lines": 0, "evaluation": {"resolved": False, "error": "x"}})
    rep.set("line 3", {"status": "error", "error": "line 3: not valid JSON"})
    data = json.loads(report_path(out).read_text())
    assert data["totals"] == {"instances": 3, "done": 1, "skipped": 1, "errors": 1, "empty_patches": 1,
                              "evaluated": 2, "resolved": 1, "unresolved": 0, "eval_errors": 1}
    text = rep.summary()
    assert "resolved 1/2 evaluated" in text and "official grading rules" in text
    assert "error line 3: line 3: not valid JSON" in text and "error b (x)" in text
    assert BatchReport(report_path(out), {}).previous["a"]["status"] == "done"

    rerun = BatchReport(report_path(out), {"evaluate": False})              # a re-run of "b" only
    rerun.set("b", {"status": "done", "patch_lines": 3})
    data = json.loads(report_path(out).read_text())
    assert list(data["instances"]) == ["a", "line 3", "b"]                  # earlier entries kept
    assert data["instances"]["a"]["evaluation"] == {"resolved": True}
    assert data["totals"]["instances"] == 3 and data["totals"]["done"] == 2 and data["totals"]["errors"] == 1
    assert data["run_totals"] == {"instances": 1, "done": 1, "skipped": 0, "errors": 0, "empty_patches": 0,
                                  "evaluated": 0, "resolved": 0, "unresolved": 0, "eval_errors": 0}
    assert rerun.summary().splitlines()[:2] == [
        "instances 1: done 1, skipped 0, errors 0, empty patches 0",
        "the report also keeps 2 earlier instance(s) not in this run"]
