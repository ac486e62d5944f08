"""Evidence that a pytest run really ran the selected test(s) and they passed.

An exit code of 0 is not enough: code under test can call `os._exit(0)` during collection, and
a config file can turn the run into `--collect-only`. With the default `clover fix` command,
pytest writes a JUnit XML report to a temporary folder outside the repository (pytest writes it
only at the end of a complete session); the run counts as passed only when that report shows at
least one executed test, no failure or error, and, for a node id, that node itself passed.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# Added to the default pytest command: no cache writes into the repo, and the project's
# `addopts` (which could hold --collect-only, -k, --deselect ...) cannot change what runs.
PYTEST_GUARD_ARGS = ("-p", "no:cacheprovider", "-o", "addopts=")


@dataclass(frozen=True)
class Case:
    """One <testcase> of a JUnit report: `classname.name` and its outcome."""

    classname: str
    name: str
    outcome: str  # "passed" | "failed" | "error" | "skipped"

    @property
    def dotted(self) -> str:
        return f"{self.classname}.{self.name}" if self.classname else self.name


def junit_arg(report: Path) -> str:
    """The pytest option that writes the JUnit report to `report`."""
    return f"--junitxml={report}"


def read_junit(report: Path) -> list[Case] | None:
    """The test cases in a JUnit XML report; None when the file is missing or unreadable."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return None
    cases = []
    for tc in root.iter("testcase"):
        tags = {child.tag for child in tc}
        outcome = ("error" if "error" in tags else "failed" if "failure" in tags
                   else "skipped" if "skipped" in tags else "passed")
        cases.append(Case(tc.get("classname", ""), tc.get("name", ""), outcome))
    return cases


def mangle_node_id(node_id: str) -> str:
    """A pytest node id as JUnit's dotted `classname.name` (pytest's own mangling:
    `tests/test_x.py::TestA::test_b[1]` -> `tests.test_x.TestA.test_b[1]`)."""
    address, bracket, params = node_id.partition("[")
    names = address.split("::")
    path = names[0].replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    names[0] = re.sub(r"\.py$", "", path).replace("/", ".")
    names[-1] += bracket + params
    return ".".join(n for n in names if n)


def _selects(case: Case, target: str) -> bool:
    dotted = case.dotted
    for start in range(len(dotted)):
        if start and dotted[start - 1] != ".":
            continue  # match whole dotted components only (rootdir may sit above the root)
        rest = dotted[start:]
        if rest == target or (rest.startswith(target) and rest[len(target)] in ".["):
            return True
    return False


def _relative(test: str, root: Path | None) -> str:
    path, sep, rest = test.partition("::")
    if root is not None and Path(path).is_absolute():
        try:
            return Path(path).resolve().relative_to(Path(root).resolve()).as_posix() + sep + rest
        except ValueError:
            pass
    return test


def check_cases(cases: list[Case] | None, test: str, root: Path | None = None) -> str | None:
    """Why the report does not prove TEST passed, or None when it does (`root`: where the
    test ran, to read an absolute node id)."""
    if cases is None:
        return "pytest wrote no test report (the run did not complete)"
    executed = [c for c in cases if c.outcome != "skipped"]
    if not executed:
        return "no test was executed"
    bad = [c for c in executed if c.outcome in ("failed", "error")]
    if bad:
        return f"{len(bad)} test(s) failed or errored"
    if "::" in test and not test.lstrip().startswith("-"):
        target = mangle_node_id(_relative(test.strip(), root))
        mine = [c for c in cases if _selects(c, target)]
        if not mine:
            return f"{test} is not among the tests that ran"
        if any(c.outcome != "passed" for c in mine):
            return f"{test} did not pass (skipped)"
    return None
