"""Environments: the base-commit fallback of a shallow clone, verification before an
environment is recorded (and a cached broken one rebuilt), interpreter discovery, and the
`--python` overlay that makes a src-layout project's tests import the patched worktree."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import env_cases as ec
from modes_helpers import git
from clover_cli.modes.swebench import environments as envs
from clover_cli.modes.swebench import evaluate
from clover_cli.modes.swebench.environments import EnvError, ensure_env, env_key
from clover_cli.modes.swebench.evaluate import EvalOptions, evaluate_prediction
from clover_cli.modes.swebench.instances import Instance
from clover_cli.modes.swebench.specs import EvalSpec


def _pipless(real_run):
    """_Builder.run making the venv without pip (seconds less); nothing else changes."""
    def run(self, argv, cwd=None, timeout=3600):
        if argv[1:3] == ["-m", "venv"]:
            argv = [*argv[:3], "--without-pip", *argv[3:]]
        return real_run(self, argv, cwd, timeout)
    return run


@pytest.fixture
def offline(monkeypatch):
    """pip may only read local files; uv is not used (the builder's own venv + pip path)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / "uv").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))


# 1. a shallow clone lacks the environment_setup_commit: read at the base commit, with a note

def test_requirements_of_a_missing_setup_commit_are_read_at_the_base_commit(tmp_path):
    clone, setup, base = ec.shallow_clone_lacking_setup_commit(tmp_path, "six==1.0\n")
    assert subprocess.run(["git", "-C", str(clone), "cat-file", "-e", setup + "^{commit}"],
                          capture_output=True).returncode != 0      # really missing
    notes: list[str] = []
    text, at = envs._requirements_with_fallback(clone, "acme/toy", setup, base, notes)
    assert text == "six==1.0\n" and at == base
    assert len(notes) == 1 and setup[:12] in notes[0] and base[:12] in notes[0]
    assert "not in the clone" in notes[0]
    notes.clear()                                   # the setup commit present: read there
    text, at = envs._requirements_with_fallback(clone, "acme/toy", base, base, notes)
    assert (text, at, notes) == ("six==1.0\n", base, [])


@pytest.mark.slow  # builds a real virtual environment (~8 s)
def test_shallow_clone_environment_installs_the_base_commits_requirements(tmp_path, offline, monkeypatch):
    wheel = ec.fake_pytest_wheel(tmp_path / "wheels")
    clone, setup, base = ec.shallow_clone_lacking_setup_commit(tmp_path, f"{wheel}\n")
    spec = EvalSpec(python=ec.HERE, packages="requirements.txt")
    # the official spec table stands in here: a repository whose spec reads requirements.txt
    monkeypatch.setattr(evaluate, "spec_for", lambda inst: spec)
    inst = Instance(instance_id="acme__toy-1", repo="acme/toy", base_commit=base, problem_statement="p",
                    fail_to_pass=("t",), version="1.0", extra={"environment_setup_commit": setup})
    log = io.StringIO()
    _, env, _ = evaluate.prepare(inst, EvalOptions(env_dir=tmp_path / "envs", progress=log), clone)
    assert env.has_module("pytest"), log.getvalue()
    out = log.getvalue()
    assert f"note: environment_setup_commit {setup[:12]} is not in the clone" in out
    assert f"installing the requirements at {base[:12]}" in out and out.endswith("ready\n")
    meta = json.loads((env.root / envs.ENV_META).read_text())
    assert meta["verified"] is True and any("not in the clone" in w for w in meta["warnings"])


# 2. an environment is verified before it is recorded; a cached broken one is rebuilt

def test_an_environment_that_fails_verification_is_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(envs._Builder, "run", _pipless(envs._Builder.run))
    clone = tmp_path / "pallets__flask"
    clone.mkdir()
    spec = EvalSpec(python=ec.HERE)                     # pytest -rA, but nothing installs pytest
    log = io.StringIO()
    with pytest.raises(EnvError, match="failed verification: it has no pytest"):
        ensure_env(spec, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", log)
    root = tmp_path / "envs" / env_key("acme/toy", "1.0", spec)
    assert not (root / envs.ENV_META).exists() and "ready" not in log.getvalue()
    wrong = EvalSpec(python="2.1", test_cmd="./runtests.py")    # asks for another Python
    monkeypatch.setattr(envs, "_find_python", lambda version, required=True: sys.executable)
    with pytest.raises(EnvError, match=f"its python is {ec.HERE}, the spec asks for 2.1"):
        ensure_env(wrong, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", io.StringIO())


def _old_style_record(root: Path, python: Path) -> None:
    """What an earlier Clover left: a venv and its record, never verified."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (root / envs.ENV_META).write_text(json.dumps({"python": str(python), "warnings": []}))


def test_a_cached_broken_environment_is_detected_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(envs._Builder, "run", _pipless(envs._Builder.run))
    clone = tmp_path / "pallets__flask"
    clone.mkdir()
    runner = EvalSpec(python=ec.HERE, test_cmd="./tests/runtests.py")    # needs no pytest
    root = tmp_path / "envs" / env_key("acme/toy", "1.0", runner)
    _old_style_record(root, tmp_path / "gone" / "bin" / "python")       # its python was removed
    log = io.StringIO()
    env = ensure_env(runner, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", log)
    assert env.python.is_file() and env.python == root / "bin" / "python"
    assert "fails verification (its python" in log.getvalue() and "rebuilding" in log.getvalue()
    assert log.getvalue().endswith("ready\n")
    again = io.StringIO()                                               # now reused as it is
    assert ensure_env(runner, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", again) == env
    assert again.getvalue() == ""

    pytest_spec = EvalSpec(python=ec.HERE)                              # a cached env, no pytest
    root = tmp_path / "envs" / env_key("acme/toy", "1.0", pytest_spec)
    _old_style_record(root, root / "bin" / "python")
    log = io.StringIO()
    with pytest.raises(EnvError, match="no pytest"):
        ensure_env(pytest_spec, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", log)
    assert "the cached environment fails verification (it has no pytest" in log.getvalue()
    assert not (root / envs.ENV_META).exists()


@pytest.mark.slow  # builds a real virtual environment (~8 s)
def test_a_cached_environment_without_pytest_is_rebuilt_with_it(tmp_path, offline):
    wheel = ec.fake_pytest_wheel(tmp_path / "wheels")
    clone = tmp_path / "pallets__flask"
    clone.mkdir()
    spec = EvalSpec(python=ec.HERE, pip_packages=(str(wheel),))
    root = tmp_path / "envs" / env_key("acme/toy", "1.0", spec)
    _old_style_record(root, root / "bin" / "python")
    log = io.StringIO()
    env = ensure_env(spec, "acme/toy", "1.0", clone, "0" * 40, tmp_path / "envs", log)
    assert "rebuilding" in log.getvalue() and env.has_module("pytest")


# 3. interpreters are found where pyenv and uv keep them, and on PATH

def test_interpreters_are_found_in_pyenv_uv_and_path(tmp_path, monkeypatch):
    from clover_cli.modes.swebench import interpreters

    v = ec.HERE
    home = tmp_path / "home"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(empty))
    for var in ("PYENV_ROOT", "UV_PYTHON_INSTALL_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert interpreters.find_python(v) is None
    with pytest.raises(EnvError) as err:
        envs._find_python("2.1")
    assert "~" not in str(err.value) and str(home / ".pyenv" / "versions") in str(err.value)
    assert "--python" in str(err.value)

    uv = ec.link_python(home / ".local/share/uv/python" / f"cpython-{v}.4-linux-x86_64-gnu" / "bin",
                        f"python{v}", "python3")
    assert interpreters.find_python(v) == uv
    pyenv_old = ec.link_python(home / ".pyenv/versions" / f"{v}.1" / "bin", f"python{v}")
    pyenv_new = ec.link_python(home / ".pyenv/versions" / f"{v}.10" / "bin", f"python{v}")
    ec.link_python(home / ".pyenv/versions" / "2.7.18" / "bin", "python2.7")
    assert interpreters.find_python(v) == pyenv_new                     # newest patch release
    assert pyenv_old in [p for _, p in interpreters.candidates(v)]

    custom = ec.link_python(tmp_path / "pyenv-root" / "versions" / f"{v}.2" / "bin", "python3")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv-root"))
    assert interpreters.find_python(v) == custom
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "nowhere"))
    moved = ec.link_python(tmp_path / "uv-pythons" / f"cpython-{v}.0-linux-x86_64-gnu" / "bin", "python3")
    assert interpreters.find_python(v) == moved

    shim = empty / f"python{v}"                    # a pyenv shim for a version not installed
    shim.write_text("#!/bin/sh\necho 'pyenv: version not installed' >&2\nexit 127\n")
    shim.chmod(0o755)
    assert interpreters.find_python(v) == moved
    shim.unlink()
    on_path = ec.link_python(empty, f"python{v}")
    assert interpreters.find_python(v) == on_path                       # PATH first
    assert [w for w, _ in interpreters.candidates(v)] == ["PATH", "uv"]


# 4. --python: the tests import the patched worktree, not the interpreter's installed copy

def _toy_instance(clone: Path, base: str) -> tuple[Instance, str]:
    def diff(edit) -> str:
        edit()
        git(clone, "add", "-A")
        patch = git(clone, "diff", "--cached", "HEAD") + "\n"
        git(clone, "reset", "-q", "--hard", "HEAD")
        return patch

    toy = clone / "src" / "toy" / "__init__.py"
    test = clone / "tests" / "test_toy.py"
    gold = diff(lambda: toy.write_text(ec.TOY.replace("a - b", "a + b")))
    test_patch = diff(lambda: test.write_text(ec.TOY_TEST + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"))
    inst = Instance(instance_id="pallets__flask-9100", repo="pallets/flask", base_commit=base,
                    problem_statement="add() subtracts", fail_to_pass=("tests/test_toy.py::test_add",),
                    pass_to_pass=("tests/test_toy.py::test_small",), test_patch=test_patch, version="2.3")
    return inst, gold


def test_forced_python_runs_the_patched_src_layout_worktree_not_its_installed_copy(tmp_path):
    clone = tmp_path / "pallets__flask"
    base = ec.make_src_layout_repo(clone)
    inst, gold = _toy_instance(clone, base)
    python = ec.interpreter_with_installed_toy(tmp_path / "user-venv")
    installed = subprocess.run([str(python), "-c", "import toy, pytest; print(toy.__file__)"],
                               capture_output=True, text=True, check=True).stdout
    assert str(tmp_path / "user-venv") in installed                   # it imports its own copy
    ev = evaluate_prediction(clone, inst, gold, tmp_path / "w",
                             EvalOptions(python=str(python), log_dir=tmp_path / "logs"))
    assert ev["verdict"] == "resolved", ev
    assert ev["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_toy.py::test_add"]
    assert ev["overlay"].endswith("w.overlay") and not Path(ev["overlay"]).exists()
    assert str(python) in ev["test_command"]                          # the cached command's form
    # verdicts cached by the old code graded the installed copy: the new key grades again
    assert envs.forced_env(str(python)).key == f"python:{python}+overlay"
    assert not list((tmp_path / "user-venv").rglob("*clover*"))         # nothing written into it


def test_forced_python_that_cannot_make_an_overlay_is_refused(tmp_path):
    clone = tmp_path / "pallets__flask"
    base = ec.make_src_layout_repo(clone)
    inst, gold = _toy_instance(clone, base)
    python = tmp_path / "bin" / "python3"                             # an interpreter without venv
    python.parent.mkdir()
    python.write_text(f"#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = venv ]; then\n"
                      f"  echo 'No module named venv' >&2; exit 1\nfi\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    ev = evaluate_prediction(clone, inst, gold, tmp_path / "w", EvalOptions(python=str(python)))
    assert ev["verdict"] == "error"
    assert "cannot make an overlay venv (No module named venv)" in ev["reason"]
    assert "not the patched worktree" in ev["reason"]
