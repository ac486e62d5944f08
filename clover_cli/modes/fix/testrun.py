"""Running a project's test command: argv building, trimming output, reading pytest results.

Commands are run without a shell. A template is split with shlex; the token `{test}` becomes the
test id (or, for a `-k ...`-style expression, its own shlex split), `{tests}` becomes all ids.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_FIX_CMD = "python -m pytest -x -q -p no:cacheprovider -o addopts= {test}"
PYTEST_USAGE_ERROR = 4
PYTEST_NO_TESTS = 5


class TestCommandError(ValueError):
    """A test command that cannot be built or started; one line for the user."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class TestRun:
    """One run of the test command."""

    __test__ = False  # not a pytest test class

    argv: tuple[str, ...]
    returncode: int
    output: str  # stdout and stderr together
    seconds: float
    timed_out: bool = False
    unproven: str | None = None  # why the run does not prove the test passed (exit 0 or not)

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.unproven is None


def project_test_cmd(root: Path) -> str | None:
    """`test_cmd` from the one settings loader (clover_cli/config.py): the user's config file, or
    `<root>/.clover/config.toml` only when the user trusts the repository (an untrusted
    repository's command is never run); TestCommandError if a file is unreadable."""
    from clover_cli.config import ConfigError, load_settings

    try:
        return load_settings(root, needed=("test_cmd",)).config.test_cmd
    except ConfigError as exc:
        raise TestCommandError(str(exc)) from None


def _python() -> str:
    # `python` from PATH honours an activated project venv; fall back to our own interpreter.
    return shutil.which("python") or sys.executable


def _test_tokens(test: str) -> list[str]:
    return shlex.split(test) if test.lstrip().startswith("-") else [test]


def build_argv(template: str, tests: list[str]) -> list[str]:
    """The argv for a command template and test ids (see the module doc for placeholders)."""
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise TestCommandError(f"bad test command {template!r}: {exc}") from None
    if not tokens:
        raise TestCommandError("empty test command")
    argv: list[str] = []
    placed = False
    for tok in tokens:
        if tok == "{test}":
            argv.extend(t for test in tests for t in _test_tokens(test))
            placed = True
        elif tok == "{tests}":
            argv.extend(tests)
            placed = True
        elif "{test}" in tok or "{tests}" in tok:
            argv.append(tok.replace("{tests}", " ".join(tests)).replace("{test}", " ".join(tests)))
            placed = True
        else:
            argv.append(tok)
    if not placed:
        argv.extend(t for test in tests for t in _test_tokens(test))
    if argv[0] == "python":
        argv[0] = _python()
    return argv


def is_pytest(argv: list[str] | tuple[str, ...]) -> bool:
    """Whether the command runs pytest (its exit codes and `-rA` summary can be read)."""
    return any(Path(a).name in ("pytest", "py.test") for a in argv[:3]) or \
        ("-m" in argv[:3] and "pytest" in argv[:4])


def run_tests(argv: list[str], cwd: Path, timeout: float = 900, confined: bool = False,
              writable: tuple[str, ...] = ()) -> TestRun:
    """Run a test command; TestCommandError if the program cannot be started. `confined`: in the
    workspace sandbox and without secrets, like the agent's shell (tools/sandbox.py's `confine`;
    `writable`: folders outside `cwd` it may write, e.g. a report folder)."""
    import time

    env = dict(os.environ)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    env["PY_COLORS"] = "0"
    run_argv = argv
    if confined:
        from clover_cli.tools.sandbox import confine

        _check_program(argv[0], cwd, env.get("PATH"))  # inside bwrap it would be bwrap's error
        run_argv, env, _ = confine(cwd, argv, env, writable)
    start = time.monotonic()
    try:
        proc = subprocess.run(run_argv, cwd=str(cwd), capture_output=True, text=True,
                              errors="replace", timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise TestCommandError(f"test command not found: {argv[0]}") from None
    except PermissionError:
        raise TestCommandError(f"test command not executable: {argv[0]}") from None
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        return TestRun(tuple(argv), -1, out + f"\n[timed out after {timeout:.0f}s]",
                       time.monotonic() - start, timed_out=True)
    return TestRun(tuple(argv), proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


def _check_program(prog: str, cwd: Path, path: str | None) -> None:
    found = os.path.join(cwd, prog) if os.sep in prog else shutil.which(prog, path=path)
    if not found or not os.path.exists(found):
        raise TestCommandError(f"test command not found: {prog}")
    if not os.access(found, os.X_OK) or os.path.isdir(found):
        raise TestCommandError(f"test command not executable: {prog}")


def trim_output(text: str, max_chars: int = 6000, head: int = 1500) -> str:
    """Keep the start and the end of a long test log (the end holds pytest's summary)."""
    if len(text) <= max_chars:
        return text
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(.+?)\s*$")


def parse_pytest_summary(output: str) -> dict[str, str]:
    """Per-test status from pytest's `-rA` short summary: {test id: PASSED|FAILED|...}."""
    results: dict[str, str] = {}
    for line in output.splitlines():
        m = _SUMMARY.match(line)
        if not m:
            continue
        status, rest = m.groups()
        if status == "SKIPPED":
            continue  # "SKIPPED [1] file:line: reason" carries no node id
        node = rest.split(" - ", 1)[0].strip()
        if results.get(node) in ("FAILED", "ERROR"):
            continue  # a test that fails and errors in teardown stays failed
        results[node] = status
    return results
