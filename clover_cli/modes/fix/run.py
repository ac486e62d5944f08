"""`clover fix TEST`: make a failing test pass with the agent, checked by re-running the test.

Flow: run the test; passing -> done. Failing -> the agent gets the trimmed failure output (edits
auto-approved, shell commands answered yes, the test files protected), then the test is re-run
here (never trusted from the model); while it fails and attempts remain, the new output goes back
to the agent in the same session. The result carries the diff of everything that changed.
"""
from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, TextIO

from clover_cli.agent.config import DEFAULT_MAX_STEPS
from clover_cli.modes.fix.evidence import check_cases, junit_arg, read_junit
from clover_cli.modes.fix.snapshots import diff_trees, snapshot_tree
from clover_cli.modes.headless import TurnRecord, drive_turn
from clover_cli.modes.fix.testguard import TestFileGuard, protected_test_paths
from clover_cli.modes.fix.testrun import (DEFAULT_FIX_CMD, PYTEST_NO_TESTS, PYTEST_USAGE_ERROR,
                                      TestCommandError, TestRun, build_argv, is_pytest,
                                      project_test_cmd, run_tests, trim_output)


class FixError(ValueError):
    """Bad input for `clover fix` (exit 2); one line for the user."""


@dataclass
class FixOptions:
    """What `clover fix` was asked to do."""

    test: str
    root: Path
    test_cmd: str | None = None  # template with {test}; None: project config, then the default
    attempts: int = 3
    max_steps: int = DEFAULT_MAX_STEPS
    allow_test_edits: bool = False
    test_timeout: float = 900.0
    output_chars: int = 6000  # failure output given to the agent (head + tail)
    max_new_tokens: int | None = None  # per model call; None: the agent's default

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser()
        if not self.root.is_dir():
            raise FixError(f"root {str(self.root)!r} is not a directory")
        self.root = self.root.resolve()
        if not self.test.strip():
            raise FixError("TEST is empty")
        if self.attempts < 1:
            raise FixError("--attempts must be at least 1")
        if self.max_steps < 1:
            raise FixError("--max-steps must be at least 1")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise FixError("--max-new-tokens must be at least 1")


@dataclass
class FixResult:
    """The outcome; `status` is "already_passing", "fixed" or "failed"."""

    status: str
    passed: bool
    attempts: int
    command: list[str]
    test_output: str
    diff: str = ""
    changed_files: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    reverted_test_edits: list[str] = field(default_factory=list)
    turns: list[dict] = field(default_factory=list)
    session_id: str | None = None
    session_path: str | None = None
    checked: bool = False  # True: passed means pytest's report shows the test ran and passed
    unproven: str | None = None  # exit code 0, but the report did not show the test passing

    def as_dict(self) -> dict:
        """A JSON-ready dict (for `--json`)."""
        return asdict(self)


def resolve_command(opts: FixOptions) -> tuple[list[str], bool]:
    """The test argv (--test-cmd, else `test_cmd` from the settings loader: the user's config or a
    trusted repository's .clover/config.toml, else the default) and
    whether it is the default pytest command, whose result is checked from pytest's own report
    (a custom command passes on exit code 0)."""
    try:
        template = opts.test_cmd or project_test_cmd(opts.root) or DEFAULT_FIX_CMD
        return build_argv(template, [opts.test]), template == DEFAULT_FIX_CMD
    except TestCommandError as exc:
        raise FixError(str(exc)) from None


def run_test(opts: FixOptions, argv: list[str], first: bool = False, checked: bool = False) -> TestRun:
    """Run the test once; FixError when the command cannot start or, on the first run, when
    pytest finds no such test (later, after the agent's changes, that is just a failure).

    The test runs like an approved shell command: in the workspace sandbox, with no secret in its
    environment (docs/security.md). `checked`: the default pytest command; it also writes a JUnit report to a temporary folder
    outside the repository and passes only when that report proves the test ran and passed."""
    try:
        if checked:
            with tempfile.TemporaryDirectory(prefix="clover-fix-") as tmp:
                report = Path(tmp) / "report.xml"
                run = run_tests(argv + [junit_arg(report)], opts.root, opts.test_timeout,
                                confined=True, writable=(tmp,))
                why = check_cases(read_junit(report), opts.test, opts.root)
            run = replace(run, argv=tuple(argv), unproven=why)
        else:
            run = run_tests(argv, opts.root, opts.test_timeout, confined=True)
    except TestCommandError as exc:
        raise FixError(str(exc)) from None
    if first and is_pytest(argv) and run.returncode in (PYTEST_USAGE_ERROR, PYTEST_NO_TESTS):
        last = [ln for ln in run.output.strip().splitlines() if ln.strip()]
        why = "no tests ran" if run.returncode == PYTEST_NO_TESTS else "usage error"
        raise FixError(f"pytest could not run {opts.test!r} ({why}): {last[-1] if last else ''}".rstrip(": "))
    if first and run.unproven and run.returncode == 0 and not run.timed_out:
        raise FixError(f"pytest exited with 0 for {opts.test!r} but {run.unproven}")
    return run


def _prompt(name: str, **values) -> str:
    from clover_cli.agent.prompt_files import render

    return render(name, **values)


def _listing(paths: list[str], limit: int = 12) -> str:
    if len(paths) <= limit:
        return ", ".join(paths)
    return ", ".join(paths[:limit]) + f" and {len(paths) - limit} more test files"


def _changed_files(diff: str) -> list[str]:
    files = []
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            if len(parts) == 2:
                files.append(parts[1])
    return files


def run_fix(opts: FixOptions, make_backend: Callable[[], object], *,
            log: TextIO | None = None) -> FixResult:
    """Run the whole fix loop. `make_backend()` is called only when the test fails.

    Raises FixError for bad input (unknown test, command not found, model that fails to load).
    """
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.tools.checkpoints import CheckpointStore

    argv, checked = resolve_command(opts)
    command_text = " ".join(argv)
    first = run_test(opts, argv, first=True, checked=checked)
    if first.passed:
        return FixResult("already_passing", True, 0, argv, first.output, checked=checked)

    protected = protected_test_paths(opts.test, opts.root)
    guard = None if opts.allow_test_edits else TestFileGuard(opts.root, protected)
    before = snapshot_tree(opts.root)
    try:
        backend = make_backend()
    except Exception as exc:  # a model that cannot load is bad input: one line, exit 2
        raise FixError(f"cannot load model: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    extra = {"max_new_tokens": opts.max_new_tokens} if opts.max_new_tokens else {}
    cfg = AgentConfig(root=opts.root, approval="auto-edit", max_steps=opts.max_steps, **extra,
                      protected_paths=() if opts.allow_test_edits else tuple(protected),
                      meta={"mode": "fix", "test": opts.test, "command": command_text})
    agent = Agent(backend, cfg)
    result = FixResult("failed", False, 0, argv, first.output, checked=checked,
                       protected=[] if opts.allow_test_edits else protected)
    text = _prompt("fix_task.md", test=opts.test, command=command_text,
                   output=trim_output(first.output, opts.output_chars),
                   guard=_prompt("fix_guard.md", protected=_listing(
                       [p for p in protected if (opts.root / p).exists()] or protected)) if guard else "")
    run = first
    # One checkpoint group for the whole fix: one `clover undo` reverts every tool edit of it.
    with CheckpointStore(opts.root).group(f"clover fix {opts.test}"):
        try:
            for attempt in range(1, opts.attempts + 1):
                if log is not None:
                    log.write(f"attempt {attempt}/{opts.attempts}\n")
                record: TurnRecord = drive_turn(agent, text, log=log)
                result.turns.append({"attempt": attempt, "reason": record.reason,
                                     "tool_calls": record.tool_calls, "errors": record.errors,
                                     "final_text": record.final_text})
                reverted = guard.restore() if guard else []
                result.reverted_test_edits.extend(r for r in reverted if r not in result.reverted_test_edits)
                result.attempts = attempt
                run = run_test(opts, argv, checked=checked)
                if run.passed:
                    break
                notes = [_prompt("fix_test_reverted.md", files=_listing(reverted))] if reverted else []
                if run.unproven and run.returncode == 0 and not run.timed_out:
                    notes.append(_prompt("fix_unproven.md", why=run.unproven))
                note = "\n".join(notes)
                text = _prompt("fix_retry.md", attempt=attempt + 1, attempts=opts.attempts,
                               command=command_text, output=trim_output(run.output, opts.output_chars),
                               note=note)
        except KeyboardInterrupt:  # the turn was cancelled (its running tool stopped) and has ended
            if guard:
                guard.restore()  # never leave the user's test changed
            raise
    result.passed = run.passed
    result.status = "fixed" if run.passed else "failed"
    result.test_output = run.output
    result.unproven = run.unproven
    after = snapshot_tree(opts.root)
    result.diff = diff_trees(opts.root, before, after) if before and after else _agent_diff(agent)
    result.changed_files = _changed_files(result.diff) or list(getattr(agent, "changed_files", []))
    result.session_id = getattr(agent, "session_id", None)
    path = getattr(agent, "session_path", None)
    result.session_path = str(path) if path else None
    return result


def _agent_diff(agent) -> str:
    try:
        return agent.diff()
    except Exception:
        return ""
