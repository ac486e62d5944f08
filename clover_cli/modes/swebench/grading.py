"""Grading FAIL_TO_PASS / PASS_TO_PASS from a parsed test log, with the official rules.

The rules of the SWE-bench harness's `get_eval_report` (swebench.harness.grading), restated:

- a FAIL_TO_PASS test succeeds only when the log shows it PASSED or XFAIL; SKIPPED, FAILED,
  ERROR and a test missing from the log are failures (a skipped target is not a fix);
- a PASS_TO_PASS test is kept when it PASSED, XFAIL or SKIPPED; FAILED, ERROR or missing fail;
- a dataset id cut inside its parameter (more `[` than `]`, e.g. `test_pragmas[<meta`) matches the
  log ids that start with it, when those all agree on pass or fail;
- resolved = every FAIL_TO_PASS and every PASS_TO_PASS test succeeds;
- a log with no test section, or one whose test command exited non-zero while no test failed or
  errored (the log does not describe the run), or that shows no test result at all, gives no
  status map: nothing is graded and the instance is not resolved.
"""
from __future__ import annotations

from clover_cli.modes.swebench.logparse import exit_code_of, log_test_section

PASSING = ("PASSED", "XFAIL")


def _resolve(case: str, status_map: dict[str, str]) -> str | None:
    if case in status_map:
        return case
    if case.count("[") > case.count("]"):
        hits = [k for k in status_map if k.startswith(case)]
        if hits and len({status_map[k] in PASSING for k in hits}) == 1:
            return hits[0]
    return None


def case_status(case: str, status_map: dict[str, str]) -> str | None:
    """The status the log gives a dataset test id (None: not in the log)."""
    key = _resolve(case, status_map)
    return None if key is None else status_map[key]


def grade_tests(status_map: dict[str, str], fail_to_pass, pass_to_pass) -> dict:
    """{"FAIL_TO_PASS": {"success": [...], "failure": [...]}, "PASS_TO_PASS": {...}}."""
    f2p = {"success": [], "failure": []}
    for case in fail_to_pass:
        ok = case_status(case, status_map) in PASSING
        f2p["success" if ok else "failure"].append(case)
    p2p = {"success": [], "failure": []}
    for case in pass_to_pass:
        ok = case_status(case, status_map) in PASSING + ("SKIPPED",)
        p2p["success" if ok else "failure"].append(case)
    return {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}


def is_resolved(tests_status: dict) -> bool:
    """Every FAIL_TO_PASS and PASS_TO_PASS test succeeded (an empty list counts as all)."""
    return not tests_status["FAIL_TO_PASS"]["failure"] and not tests_status["PASS_TO_PASS"]["failure"]


def status_map_from_log(log: str, parse) -> tuple[dict[str, str], str | None]:
    """(status map, why there is none) for a framed log and a parser `parse(text)`."""
    section = log_test_section(log)
    if section is None:
        return {}, "the log has no complete test output"
    status_map = parse(section) or parse(log)
    if not status_map:
        return {}, "the test run reported no test results"
    code = exit_code_of(log)
    if code not in (None, 0) and not any(s in ("FAILED", "ERROR") for s in status_map.values()):
        return {}, f"the test command exited {code} but the log reports no failure"
    return status_map, None
