"""The optional `swebench` package (`pip install 'clover-cli[swebench]'`), used where it helps.

Imported lazily and only its docker-free parts: the log parsers, the specs and
`swebench.harness.grading.get_eval_report`. Each use falls back to Clover's own restatement
(logparse.py, grading.py, specs.py) when the package is missing or its API differs.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path


def available() -> bool:
    """Whether the package's grader can be imported (without docker running)."""
    try:
        from swebench.harness.grading import get_eval_report  # noqa: F401
    except Exception:
        return False
    return True


def skip_is_failure() -> bool:
    """Whether the installed grader counts a skipped FAIL_TO_PASS test as a failure (the current
    rule; older releases let an all-skipped FAIL_TO_PASS list through as resolved)."""
    try:
        from swebench.harness import grading
    except Exception:
        return False
    return hasattr(grading, "test_maintained")


def make_test_spec(instance, parser_name: str = "parse_log_pytest"):
    """A TestSpec for grading only (no scripts: nothing is built or run by it), or None."""
    spec_cls = None
    for mod in ("swebench.types", "swebench.harness.test_spec.test_spec"):
        try:
            spec_cls = getattr(__import__(mod, fromlist=["TestSpec"]), "TestSpec")
            break
        except Exception:
            continue
    if spec_cls is None or not dataclasses.is_dataclass(spec_cls):
        return None
    values = {"instance_id": instance.instance_id, "repo": instance.repo,
              "version": instance.version, "FAIL_TO_PASS": list(instance.fail_to_pass),
              "PASS_TO_PASS": list(instance.pass_to_pass), "log_parser": parser_name,
              "eval_type": "pass_and_fail", "language": "py", "arch": "x86_64"}
    kwargs = {}
    for f in dataclasses.fields(spec_cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = [] if "list" in str(f.type) else (
                {} if "dict" in str(f.type) else "")
    try:
        return spec_cls(**kwargs)
    except Exception:
        return None


def official_report(instance, model_patch: str, log_path: Path, parser_name: str) -> dict | None:
    """The package's own `get_eval_report` entry for this instance's log, or None."""
    try:
        from swebench.harness.grading import get_eval_report
    except Exception:
        return None
    spec = make_test_spec(instance, parser_name)
    if spec is None:
        return None
    pred = {"instance_id": instance.instance_id, "model_name_or_path": "clover",
            "model_patch": model_patch}
    try:
        report = get_eval_report(spec, pred, str(log_path), include_tests_status=True)
    except Exception:
        return None
    return report.get(instance.instance_id)
