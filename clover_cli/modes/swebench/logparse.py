"""Reading a SWE-bench evaluation log into {test id: status}, the way the official harness does.

The evaluation log has the test output between two marker lines and the test command's exit
status after them (the official harness writes the same markers, so its own grader can read our
logs: see docs/modes.md). Per-repository parsers come from the `swebench` package when it is
installed (`clover-cli[swebench]`); without it a built-in parser reads pytest's `-rA` summary.

The built-in parser follows the official normalisation, which the dataset ids depend on:
a summary line `STATUS ID ...` gives the id as the second whitespace-separated word (so an id
whose parameter holds a space is cut there, `test_pragmas[<meta`), the ` - message` of a FAILED
line is dropped, and `SKIPPED [N] file:line: reason` lines carry no id.
"""
from __future__ import annotations

import re

START_MARK = ">>>>> Start Test Output"
END_MARK = ">>>>> End Test Output"
EXIT_MARK = ">>>>> Test Exit Code"
STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
_SKIP_COUNT = re.compile(r"^\[\d+\]$")
_EXIT_RE = re.compile(re.escape(EXIT_MARK) + r":\s*(-?\d+)")

# Which official parser each repository uses (the parser names of the `swebench` package).
# Repositories not listed are read with the plain pytest parser.
PYTEST_FAMILY = {
    "pytest", "pytest_options", "pytest_v2", "flask", "requests", "xarray", "sqlfluff",
    "pydicom", "pylint", "astropy", "scikit", "sphinx", "pvlib", "pyvista", "astroid",
    "marshmallow", "matplotlib", "seaborn",
}


def frame_log(output: str, exit_code: int | None) -> str:
    """The test output wrapped in the markers, with the exit status after the end marker."""
    tail = f"{EXIT_MARK}: {exit_code}\n" if exit_code is not None else ""
    body = output if output.endswith("\n") else output + "\n"
    return f"{START_MARK}\n{body}{END_MARK}\n{tail}"


def log_test_section(log: str) -> str | None:
    """The text between the markers, or None when the log has no complete test section."""
    if START_MARK not in log or END_MARK not in log:
        return None
    return log.split(START_MARK, 1)[1].split(END_MARK, 1)[0]


def exit_code_of(log: str) -> int | None:
    """The recorded exit status of the test command, or None."""
    m = _EXIT_RE.search(log)
    return int(m.group(1)) if m else None


def parse_pytest_rA(log: str) -> dict[str, str]:
    """Built-in parser: pytest's `-rA` short summary -> {id: PASSED|FAILED|ERROR|SKIPPED|XFAIL}.

    A later line for the same id wins, as in the official parser.
    """
    status_map: dict[str, str] = {}
    for line in log.split("\n"):
        if not line.startswith(STATUSES):
            continue
        if line.startswith("FAILED"):
            line = line.replace(" - ", " ")
        words = line.split()
        if len(words) < 2:
            continue
        status, name = words[0], words[1]
        if status not in STATUSES:
            continue  # e.g. "PASSEDfoo"
        if status == "SKIPPED" and _SKIP_COUNT.match(name):
            continue
        status_map[name] = status
    return status_map


def _official_parser(repo: str, parser_name: str | None):
    """The `swebench` package's parser for this repository, or None (package missing)."""
    try:
        from swebench.harness import log_parsers as lp  # optional extra
    except Exception:  # not installed, or it fails to import: use the built-in one
        return None
    registry = getattr(lp, "PARSER_REGISTRY", None)  # swebench 5: parsers by name
    if parser_name and isinstance(registry, dict) and parser_name in registry:
        return registry[parser_name]
    by_repo = getattr(lp, "MAP_REPO_TO_PARSER", None)  # swebench 4: parsers by repository
    if by_repo is None:
        try:
            from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY as by_repo
        except Exception:
            by_repo = None
    if isinstance(by_repo, dict) and repo in by_repo:
        return by_repo[repo]
    if isinstance(registry, dict):
        return registry.get("parse_log_pytest")
    return None


class ParserUnavailable(RuntimeError):
    """The repository's log format needs the `swebench` package's parser."""


NEEDS_OFFICIAL = {"django/django", "sympy/sympy"}


def parser_for(repo: str, parser_name: str | None = None, spec_obj=None):
    """(name, function(log) -> status map) for a repository.

    Uses the official parser when `swebench` is importable; otherwise the built-in pytest
    parser, and ParserUnavailable for repositories whose logs are not pytest's (Django, SymPy).
    """
    official = _official_parser(repo, parser_name)
    if official is not None:
        return f"swebench:{getattr(official, '__name__', 'parser')}", \
            lambda log: official(log, spec_obj)
    if repo in NEEDS_OFFICIAL or (parser_name and parser_name.removeprefix("parse_log_")
                                  not in PYTEST_FAMILY):
        raise ParserUnavailable(f"reading {repo} test logs needs the swebench package "
                                "(pip install 'clover-cli[swebench]')")
    return "builtin:pytest-rA", parse_pytest_rA
