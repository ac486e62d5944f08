"""Grading rules and log parsing, compared with the official package's where it is installed."""
from __future__ import annotations

import pytest

from clover_cli.modes.swebench import official
from clover_cli.modes.swebench.grading import case_status, grade_tests, is_resolved, status_map_from_log
from clover_cli.modes.swebench.logparse import ParserUnavailable, frame_log, parse_pytest_rA, parser_for
from clover_cli.modes.swebench.instances import Instance
from clover_cli.modes.swebench.specs import patch_files, eval_test_command, eval_test_files, spec_for

LOG = """\
tests/test_a.py::test_x PASSED                                            [ 50%]
=========================== short test summary info ============================
PASSED tests/test_a.py::test_pragmas[<meta charset=utf-8>]
PASSED tests/test_a.py::test_ok
FAILED tests/test_a.py::test_bad - AssertionError: assert 1 == 2
ERROR tests/test_a.py::test_err - RuntimeError
XFAIL tests/test_a.py::test_xf - reason
SKIPPED [1] tests/test_a.py:9: not today
SKIPPED tests/test_a.py::test_skipped_named
PASSED [100%]
"""


def test_builtin_parser_normalises_ids_like_the_official_one():
    got = parse_pytest_rA(LOG)
    assert got == {"tests/test_a.py::test_pragmas[<meta": "PASSED", "tests/test_a.py::test_ok": "PASSED",
                   "tests/test_a.py::test_bad": "FAILED", "tests/test_a.py::test_err": "ERROR",
                   "tests/test_a.py::test_xf": "XFAIL",
                   "tests/test_a.py::test_skipped_named": "SKIPPED", "[100%]": "PASSED"}
    if official.available():
        from swebench.harness.log_parsers.python import parse_log_pytest
        theirs = parse_log_pytest(LOG, None)
        theirs.pop("[1]", None)          # swebench 4.x kept the "SKIPPED [1] file:line" count as an id
        assert theirs == got


def test_grading_rules():
    sm = {"t::pass": "PASSED", "t::xf": "XFAIL", "t::skip": "SKIPPED", "t::fail": "FAILED",
          "t::err": "ERROR", "t::p[a b]": "PASSED", "t::p[a c]": "PASSED",
          "t::q[x y]": "PASSED", "t::q[x z]": "FAILED"}
    rep = grade_tests(sm, ["t::pass", "t::xf", "t::skip", "t::fail", "t::err", "t::gone", "t::p[a", "t::q[x"],
                      ["t::pass", "t::skip", "t::fail", "t::gone"])
    assert rep["FAIL_TO_PASS"] == {"success": ["t::pass", "t::xf", "t::p[a"],
                                   "failure": ["t::skip", "t::fail", "t::err", "t::gone", "t::q[x"]}
    assert rep["PASS_TO_PASS"] == {"success": ["t::pass", "t::skip"], "failure": ["t::fail", "t::gone"]}
    assert not is_resolved(rep)
    assert is_resolved(grade_tests(sm, ["t::pass"], ["t::skip"]))
    assert not is_resolved(grade_tests(sm, ["t::skip"], []))          # a skipped target is no fix
    assert case_status("t::p[a", sm) == "PASSED" and case_status("t::nope", sm) is None
    if official.skip_is_failure():
        from swebench.harness.grading import get_eval_tests_report
        off = get_eval_tests_report(sm, {"FAIL_TO_PASS": ["t::pass", "t::xf", "t::skip", "t::fail", "t::err",
                                                          "t::gone", "t::p[a", "t::q[x"],
                                         "PASS_TO_PASS": ["t::pass", "t::skip", "t::fail", "t::gone"]})
        assert off["FAIL_TO_PASS"] == rep["FAIL_TO_PASS"] and off["PASS_TO_PASS"] == rep["PASS_TO_PASS"]


def test_logs_that_describe_no_valid_run():
    assert status_map_from_log("PASSED t::a\n", parse_pytest_rA)[1] == "the log has no complete test output"
    assert "no test results" in status_map_from_log(frame_log("collected 0 items\n", 0), parse_pytest_rA)[1]
    # a hook printed PASSED lines but the run failed: the log does not describe the run
    printed = frame_log("PASSED t::a\n", 1)
    assert "exited 1" in status_map_from_log(printed, parse_pytest_rA)[1]
    real = frame_log("PASSED t::a\nFAILED t::b\n", 1)
    assert status_map_from_log(real, parse_pytest_rA) == ({"t::a": "PASSED", "t::b": "FAILED"}, None)


def _inst(repo, test_patch, version="1.0"):
    return Instance(instance_id="x", repo=repo, base_commit="b", problem_statement="p",
                    test_patch=test_patch, version=version)


PATCH = ("diff --git a/tests/test_q.py b/tests/test_q.py\n--- a/tests/test_q.py\n+++ b/tests/test_q.py\n"
         "diff --git a/tests/data/x.json b/tests/data/x.json\n--- a/tests/data/x.json\n+++ b/tests/data/x.json\n"
         "diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\nnew file mode 100644\n"
         "--- /dev/null\n+++ b/tests/admin_views/tests.py\n")


def test_test_directives_and_commands():
    assert eval_test_files(_inst("o/n", PATCH)) == ["tests/test_q.py", "tests/admin_views/tests.py"]
    assert eval_test_files(_inst("django/django", PATCH)) == ["test_q", "admin_views.tests"]
    assert patch_files(PATCH) == ["tests/test_q.py", "tests/data/x.json", "tests/admin_views/tests.py"]
    inst = _inst("o/n", PATCH, version="nope")
    spec = spec_for(inst)
    assert spec.source == "builtin" and spec.test_cmd == "pytest -rA"
    assert eval_test_command(spec, inst) == "pytest -rA tests/test_q.py tests/admin_views/tests.py"
    assert eval_test_command(spec, inst, "tox -e py -- {tests} -x") == \
        "tox -e py -- tests/test_q.py tests/admin_views/tests.py -x"
    assert spec_for(_inst("django/django", PATCH, "nope")).test_cmd.startswith("./tests/runtests.py")


def test_non_pytest_logs_need_the_package_when_it_is_missing():
    if official.available():
        name, _ = parser_for("django/django")
        assert name == "swebench:parse_log_django"
    else:
        with pytest.raises(ParserUnavailable, match="swebench"):
            parser_for("django/django")
        assert parser_for("psf/requests")[0] == "builtin:pytest-rA"
