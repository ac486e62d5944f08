"""Local, docker-free evaluation of a prediction (`clover swebench --evaluate`).

A convenience, NOT the official SWE-bench harness: it runs the repository's tests with whatever
Python and packages this machine has, not the pinned per-instance docker image. The procedure
mirrors the harness: a fresh worktree at base_commit, `git apply` the model patch, `git apply`
the test_patch, run FAIL_TO_PASS and PASS_TO_PASS; resolved when every one of them passes.
"""
from __future__ import annotations

from pathlib import Path

from clover_cli.modes.instances import Instance
from clover_cli.modes.testrun import (DEFAULT_EVAL_CMD, TestCommandError, build_argv, is_pytest,
                                      parse_pytest_summary, run_tests)
from clover_cli.modes.worktree import WorktreeError, add_worktree, apply_patch, remove_worktree

PASSING = ("PASSED", "XFAIL")


def _status_each(template: str, tests: list[str], cwd: Path, timeout: float) -> dict[str, str]:
    results: dict[str, str] = {}
    for test in tests:
        argv = build_argv(template, [test])
        run = run_tests(argv, cwd, timeout)
        status = parse_pytest_summary(run.output).get(test) if is_pytest(argv) else None
        results[test] = status or ("PASSED" if run.passed else "FAILED")
    return results


def run_test_ids(template: str, tests: list[str], cwd: Path, timeout: float = 900) -> dict[str, str]:
    """Status of each test id: PASSED / FAILED / ERROR / XFAIL / XPASS.

    pytest commands run all ids at once and read the `-rA` summary; ids missing from it (pytest
    refuses the whole run when one id is unknown) are run one by one. Other commands run once per
    id and pass on exit code 0.
    """
    if not tests:
        return {}
    argv = build_argv(template, tests)
    if not is_pytest(argv):
        return _status_each(template, tests, cwd, timeout)
    if "-rA" not in argv:
        argv.append("-rA")
    summary = parse_pytest_summary(run_tests(argv, cwd, timeout).output)
    results = {t: summary[t] for t in tests if t in summary}
    missing = [t for t in tests if t not in results]
    if missing and len(tests) > 1:
        results.update(_status_each(template, missing, cwd, timeout))
    else:
        results.update({t: "FAILED" for t in missing})
    return results


def _split(tests: tuple[str, ...], status: dict[str, str]) -> dict[str, list[str]]:
    return {"success": [t for t in tests if status.get(t) in PASSING],
            "failure": [t for t in tests if status.get(t) not in PASSING]}


def evaluate_prediction(clone: Path, instance: Instance, model_patch: str, dest: Path,
                        test_cmd: str | None = None, timeout: float = 900,
                        keep: bool = False) -> dict:
    """Evaluate one prediction in a fresh worktree `dest`; returns the report entry.

    Entry: {"resolved": bool, "patch_applied": bool, "tests_status": {"FAIL_TO_PASS":
    {"success": [...], "failure": [...]}, "PASS_TO_PASS": {...}}, "error": str (on failure)}.
    Never raises for an instance-level problem; those go into "error".
    """
    entry: dict = {"resolved": False, "patch_applied": False}
    if not instance.fail_to_pass:
        entry["error"] = "instance has no FAIL_TO_PASS tests; cannot evaluate"
        return entry
    template = test_cmd or DEFAULT_EVAL_CMD
    try:
        add_worktree(clone, instance.base_commit, dest)
    except WorktreeError as exc:
        entry["error"] = str(exc)
        return entry
    try:
        ok, msg = apply_patch(dest, model_patch, "model patch")
        if not ok:
            entry["error"] = msg
            return entry
        entry["patch_applied"] = True
        ok, msg = apply_patch(dest, instance.test_patch, "test_patch")
        if not ok:
            entry["error"] = msg
            return entry
        tests = list(dict.fromkeys(instance.fail_to_pass + instance.pass_to_pass))
        try:
            status = run_test_ids(template, tests, dest, timeout)
        except TestCommandError as exc:
            entry["error"] = str(exc)
            return entry
        f2p = _split(instance.fail_to_pass, status)
        p2p = _split(instance.pass_to_pass, status)
        entry["tests_status"] = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
        entry["resolved"] = not f2p["failure"] and not p2p["failure"]
        return entry
    finally:
        if not keep:
            remove_worktree(clone, dest)
