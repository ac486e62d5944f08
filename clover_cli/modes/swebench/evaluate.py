"""Local evaluation of one prediction, following the SWE-bench harness step by step.

1. An empty model patch is not evaluated: unresolved, as in the official harness.
2. A fresh worktree of the local clone at base_commit; the model patch goes in with the
   harness's fallbacks (patching.py); the instance's environment is built or reused (envs.py).
3. The repository is installed into the environment (the spec's pre_install and install steps);
   with `--python`, an overlay venv on top of that interpreter imports the worktree instead.
4. The test_patch's files are reset to base_commit, the test_patch is applied.
5. The test command runs on the WHOLE test files (specs.py), in the workspace sandbox without
   secrets (install steps too: both run the repository's and the patch's code; docs/security.md),
   its output framed with the harness's markers and exit status into a log (logparse.py), which
   is parsed with the repository's parser and graded (grading.py; the `swebench` package's own
   grader when it is installed and current, see official.py).

Verdicts: "resolved", "unresolved" (graded, or no patch), "error" (could not be graded: patch or
test_patch did not apply, environment, interpreter without pytest, timeout, no test log).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from clover_cli.modes.swebench import official
from clover_cli.modes.swebench.environments import EnvError, TestEnv, ensure_env, forced_env
from clover_cli.modes.swebench.grading import grade_tests, is_resolved, status_map_from_log
from clover_cli.modes.swebench.instances import Instance
from clover_cli.modes.swebench.interpreters import make_overlay
from clover_cli.modes.swebench.logparse import ParserUnavailable, frame_log, parser_for
from clover_cli.modes.swebench.patching import apply_model_patch, apply_test_patch, reset_test_files
from clover_cli.modes.swebench.specs import SYSTEM_CMD, EvalSpec, eval_test_command, is_pytest_cmd, spec_for
from clover_cli.modes.worktree import WorktreeError, add_worktree, remove_worktree


@dataclass
class EvalOptions:
    """How predictions are evaluated locally."""

    test_cmd: str | None = None  # replaces the spec's runner; {tests} = the test files
    timeout: float = 1800.0
    python: str | None = None  # force this interpreter (no environment is built)
    env_dir: Path | None = None
    keep: bool = False
    log_dir: Path | None = None  # where <id>.eval.log goes (default: beside the worktree)
    progress: TextIO | None = None


def prepare(instance: Instance, opts: EvalOptions, clone: Path) -> tuple[EvalSpec, TestEnv, str]:
    """(spec, environment, test command) for an instance; EnvError when no environment."""
    spec = spec_for(instance)
    if opts.python:
        env = forced_env(opts.python)
    else:
        commit = str(instance.extra.get("environment_setup_commit") or instance.base_commit)
        env = ensure_env(spec, instance.repo, instance.version, clone, commit, opts.env_dir,
                         opts.progress if opts.progress is not None else sys.stderr,
                         base_commit=instance.base_commit)
    command = eval_test_command(spec, instance, opts.test_cmd)
    # `pytest` as the first word runs the environment's own pytest module (same program, and no
    # other pytest found earlier on PATH can stand in for it)
    command = re.sub(r"^pytest(?=\s|$)", shlex.quote(str(env.python)) + " -m pytest", command)
    return spec, env, command


def _env_folders(env: TestEnv) -> tuple[str, ...]:
    """The folders the environment's interpreter needs inside the sandbox: its root (a venv in
    Clover's cache, an overlay beside the worktree) and the real interpreter's prefix."""
    real_prefix = Path(os.path.realpath(env.python)).parent.parent
    found = [env.root, real_prefix] if env.root is not None else [env.python.parent.parent, real_prefix]
    return tuple(dict.fromkeys(str(p) for p in found))


def _bash(script: str, cwd: Path, env: TestEnv, timeout: float, writable: tuple[str, ...] = (),
          readable: tuple[str, ...] = ()) -> tuple[int | None, str]:
    """Run `script` in the worktree like an approved shell command (tools/sandbox.py's
    `confine`): the repository's and the model patch's code is untrusted, so it runs in the
    workspace sandbox, with the allow-listed environment (no API key), set-id modes refused."""
    from clover_cli.tools.sandbox import confine

    argv, environ, _ = confine(cwd, ["bash", "-c", "set -uo pipefail\n" + script], env.environ(),
                               writable=writable, readable=readable + _env_folders(env))
    try:
        proc = subprocess.run(argv, cwd=str(cwd), capture_output=True, text=True, errors="replace",
                              timeout=timeout, env=environ, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        return None, (out.decode("utf-8", "replace") if isinstance(out, bytes) else out)
    return proc.returncode, proc.stdout + proc.stderr


def _overlay(env: TestEnv, command: str, tree: Path) -> tuple[TestEnv, str]:
    """A forced interpreter gets nothing installed: its tests run in an overlay venv on top of
    it that imports the patched worktree first (interpreters.py); EnvError when none can be made."""
    overlay = make_overlay(env.python, tree, tree.parent / (tree.name + ".overlay"))
    forced = shlex.quote(str(env.python)) + " -m pytest"
    if command.startswith(forced):
        command = shlex.quote(str(overlay)) + " -m pytest" + command[len(forced):]
    # its own key: one overlay per evaluation, so forced runs need no shared lock
    return TestEnv(python=overlay, root=overlay.parent.parent, key=f"{env.key}@{overlay}"), command


def _install(spec: EvalSpec, env: TestEnv, tree: Path, opts: EvalOptions) -> str | None:
    """Run the spec's pre_install/install steps in the worktree; an error message or None."""
    if opts.python:
        return None  # a forced interpreter gets the overlay instead
    steps = [c for c in spec.pre_install if not SYSTEM_CMD.match(c)]
    install = spec.install
    if not install and spec.source == "builtin" and any(
            (tree / f).is_file() for f in ("setup.py", "pyproject.toml")):
        install = "python -m pip install -e ."
    if install:
        steps.append(install)
    for step in steps:
        into = (str(env.root),) if env.root is not None else ()  # the step installs into the env
        code, out = _bash(step, tree, env, opts.timeout, writable=into)
        if code != 0:
            tail = out.strip().splitlines()[-1:] or ["timed out" if code is None else f"exit {code}"]
            return f"install step failed: {step[:80]}: {tail[0][:200]}"
    return None


def _grade(instance: Instance, patch: str, log: str, log_path: Path, entry: dict) -> None:
    try:
        parser_name, parse = parser_for(instance.repo, instance.extra.get("log_parser"))
    except ParserUnavailable as exc:
        entry.update(verdict="error", reason=str(exc))
        return
    entry["parser"] = parser_name
    status_map, why = status_map_from_log(log, parse)
    if why:
        entry.update(verdict="unresolved", reason=why,
                     tests_status=grade_tests({}, instance.fail_to_pass, instance.pass_to_pass))
        return
    tests = grade_tests(status_map, instance.fail_to_pass, instance.pass_to_pass)
    resolved = is_resolved(tests)
    entry["graded_by"] = "clover"
    if parser_name.startswith("swebench:") and official.skip_is_failure():
        rep = official.official_report(instance, patch, log_path, parser_name.split(":", 1)[1])
        if rep is not None and "tests_status" in rep:
            tests = {k: rep["tests_status"][k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}
            resolved = bool(rep.get("resolved"))
            entry["graded_by"] = "swebench"
    f2p, p2p = tests["FAIL_TO_PASS"], tests["PASS_TO_PASS"]
    entry.update(tests_status=tests, resolved=resolved,
                 verdict="resolved" if resolved else "unresolved",
                 reason=(f"FAIL_TO_PASS {len(f2p['success'])}/{len(f2p['success']) + len(f2p['failure'])}, "
                         f"PASS_TO_PASS {len(p2p['success'])}/{len(p2p['success']) + len(p2p['failure'])}"))


def evaluate_prediction(clone: Path, instance: Instance, model_patch: str, dest: Path,
                        opts: EvalOptions | None = None, env_info: tuple | None = None) -> dict:
    """Evaluate one prediction in a fresh worktree `dest`; returns the report entry.

    Entry: verdict, resolved, reason, patch_applied, apply_method, test_command, log,
    tests_status ({"FAIL_TO_PASS": {"success", "failure"}, "PASS_TO_PASS": ...}), and "error"
    (= reason) when the verdict is "error". Never raises for an instance-level problem.
    `env_info`: (spec, env, command) from prepare(), if already made.
    """
    opts = opts or EvalOptions()
    start = time.monotonic()
    entry: dict = {"verdict": "error", "resolved": False, "patch_applied": False}

    def done(verdict: str, reason: str) -> dict:
        entry.update(verdict=verdict, reason=reason)
        return finish()

    def finish() -> dict:
        if entry["verdict"] == "error":
            entry["error"] = entry.get("reason", "error")
        entry["seconds"] = round(time.monotonic() - start, 2)
        return entry

    if not model_patch.strip():
        return done("unresolved", "empty patch (not evaluated, as in the official harness)")
    if not instance.fail_to_pass:
        return done("error", "instance has no FAIL_TO_PASS tests; cannot evaluate")
    try:
        spec, env, command = env_info or prepare(instance, opts, clone)
    except EnvError as exc:
        return done("error", str(exc))
    entry["test_command"] = command
    if is_pytest_cmd(command) and not env.has_module("pytest"):
        return done("error", f"the test interpreter {env.python} has no pytest")
    try:
        add_worktree(clone, instance.base_commit, dest)
    except WorktreeError as exc:
        return done("error", str(exc))
    try:
        method, msg = apply_model_patch(dest, model_patch)
        if method is None:
            return done("error", f"model patch did not apply (git apply, --reject, patch --fuzz=5): {msg}")
        entry.update(patch_applied=True, apply_method=method)
        forced_folders = _env_folders(env) if opts.python else ()  # the overlay imports from them
        if opts.python:
            try:
                env, command = _overlay(env, command, dest)
            except EnvError as exc:
                return done("error", str(exc))
            entry["overlay"] = str(env.root)
        with env.lock():
            problem = _install(spec, env, dest, opts)
            if problem:
                return done("error", problem)
            reset_test_files(dest, instance.base_commit, instance.test_patch)
            ok, msg = apply_test_patch(dest, instance.test_patch)
            if not ok:
                return done("error", msg)
            script = "\n".join([*spec.eval_commands, command])
            code, output = _bash(script, dest, env, opts.timeout, readable=forced_folders)
        if code is None:
            return done("error", f"tests timed out after {opts.timeout:.0f}s")
        log = frame_log(output, code)
        log_dir = Path(opts.log_dir) if opts.log_dir else dest.parent
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / (dest.name + ".log")
        log_path.write_text(log, encoding="utf-8")
        entry["log"] = str(log_path)
        _grade(instance, model_patch, log, log_path, entry)
        return finish()
    except WorktreeError as exc:
        return done("error", str(exc))
    finally:
        if not opts.keep:
            remove_worktree(clone, dest)
            shutil.rmtree(dest.parent / (dest.name + ".overlay"), ignore_errors=True)
