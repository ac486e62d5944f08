"""Reading pytest's JUnit report: what counts as proof that the selected test ran and passed."""
from __future__ import annotations

import sys
from pathlib import Path

from clover_cli.modes.fix.evidence import PYTEST_GUARD_ARGS, Case, check_cases, junit_arg, mangle_node_id, read_junit
from modes_helpers import run

TESTS = ("import pytest\n\n\ndef test_ok():\n    pass\n\n\ndef test_skip():\n    pytest.skip('later')\n\n\n"
         "class TestK:\n    @pytest.mark.parametrize('x', [1, 2])\n    def test_p(self, x):\n        assert x == 1\n")


def test_mangle_node_id_like_pytest():
    assert mangle_node_id("tests/test_x.py::test_a") == "tests.test_x.test_a"
    assert mangle_node_id("./tests/test_x.py::TestA::test_b[1-a/b]") == "tests.test_x.TestA.test_b[1-a/b]"
    assert mangle_node_id("test_x.py") == "test_x"


def test_check_cases_rules():
    ok, skip = Case("tests.test_x", "test_a", "passed"), Case("tests.test_x", "test_s", "skipped")
    assert check_cases(None, "t.py").startswith("pytest wrote no test report")
    assert check_cases([], "t.py") == "no test was executed"
    assert check_cases([skip], "tests/test_x.py") == "no test was executed"
    assert check_cases([ok, Case("tests.test_x", "test_b", "error")], "tests/test_x.py") == \
        "1 test(s) failed or errored"
    assert check_cases([ok, skip], "tests/test_x.py") is None                 # a file: others may skip
    assert check_cases([ok], "tests/test_x.py::test_a") is None
    assert check_cases([ok, skip], "tests/test_x.py::test_s") == "tests/test_x.py::test_s did not pass (skipped)"
    assert check_cases([ok], "tests/test_x.py::test_ab") == "tests/test_x.py::test_ab is not among the tests that ran"
    assert check_cases([Case("sub.tests.test_x", "test_a", "passed")], "tests/test_x.py::test_a") is None  # rootdir above
    assert check_cases([Case("xtests.test_x", "test_a", "passed")], "tests/test_x.py::test_a") is not None
    assert check_cases([ok], "-k test_a") is None
    assert check_cases([ok], "/r/tests/test_x.py::test_a", root=Path("/r")) is None        # absolute node id


def test_real_report(tmp_path):
    (tmp_path / "test_k.py").write_text(TESTS)
    report = tmp_path / "out" / "r.xml"
    run([sys.executable, "-m", "pytest", "-q", *PYTEST_GUARD_ARGS, junit_arg(report), "test_k.py"], tmp_path,
        check=False)
    cases = read_junit(report)
    assert {(c.dotted, c.outcome) for c in cases} == {
        ("test_k.test_ok", "passed"), ("test_k.test_skip", "skipped"),
        ("test_k.TestK.test_p[1]", "passed"), ("test_k.TestK.test_p[2]", "failed")}
    not_failed = [c for c in cases if c.outcome != "failed"]
    assert check_cases(not_failed, "test_k.py::test_ok") is None
    assert check_cases(not_failed, "test_k.py::TestK::test_p[1]") is None
    assert check_cases(not_failed, "test_k.py::TestK") is None
    assert check_cases(cases, "test_k.py") == "1 test(s) failed or errored"
    assert read_junit(tmp_path / "missing.xml") is None
    (tmp_path / "bad.xml").write_text("<testsuites")
    assert read_junit(tmp_path / "bad.xml") is None
