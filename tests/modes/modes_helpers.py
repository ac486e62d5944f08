"""Helpers for the one-shot mode tests: real git repositories with a genuine bug and a failing test."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

BUGGY = "def add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("return a - b", "return a + b")
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


def alive(pid: int) -> bool:
    """Is process pid running (a zombie counts as gone)?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except FileNotFoundError:
        return False


def run(cmd, cwd, check=True, env=None, timeout=120):
    """subprocess.run with text output; fails the test on a nonzero exit when check."""
    proc = subprocess.run(cmd, cwd=str(cwd), capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def git(cwd, *args):
    return run(["git", *args], cwd).stdout.strip()


def make_calc_repo(path: Path, with_test: bool = True) -> str:
    """A git repo with calc.py (add() subtracts) and tests; returns the base commit sha.

    The commit holding the bug has test_mul.py only; test_add.py (the failing test) is the
    SWE-bench test_patch unless with_test, when it is committed too.
    """
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "Test")
    git(path, "config", "commit.gpgsign", "false")
    (path / "calc.py").write_text(BUGGY)
    (path / "tests").mkdir()
    (path / "tests" / "test_mul.py").write_text(TEST_MUL)
    (path / "conftest.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    if with_test:
        (path / "tests" / "test_add.py").write_text(TEST_ADD)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "calc with a bug")
    return git(path, "rev-parse", "HEAD")


def add_test_patch() -> str:
    """The diff that adds tests/test_add.py (the instance's test_patch)."""
    body = "".join("+" + ln + "\n" for ln in TEST_ADD.splitlines())
    n = len(TEST_ADD.splitlines())
    return ("diff --git a/tests/test_add.py b/tests/test_add.py\nnew file mode 100644\n"
            "--- /dev/null\n+++ b/tests/test_add.py\n" f"@@ -0,0 +1,{n} @@\n" + body)


def tool_call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def write_replay(path: Path, completions: list[str]) -> Path:
    path.write_text(json.dumps({"completions": completions}))
    return path


def clover_env() -> dict:
    """Environment for `clover` subprocesses: our venv first on PATH (its `python` has pytest)."""
    env = dict(os.environ)
    env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"   # the toy projects need no plugins: 3x faster pytest
    env.pop("PYTEST_ADDOPTS", None)
    return env


def sigint_default() -> None:
    """preexec_fn for a subprocess a test interrupts with SIGINT: the signal back to its default,
    as in a terminal. A suite started in the background (`nohup pytest &`, a non-interactive
    shell's `&`) inherits SIGINT ignored, Python then installs no KeyboardInterrupt handler in
    the child, and the Ctrl-C tests would hang instead of testing anything."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def clover_in_process(*args, path: str | None = None):
    """`clover ARGS` in-process (tests/in_process.py) with clover_env()'s PATH (or `path`) and
    pytest settings."""
    from in_process import clover

    env = {k: v for k, v in clover_env().items()
           if k in ("PATH", "PYTHONDONTWRITEBYTECODE", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    if path is not None:
        env["PATH"] = path
    return clover(*args, env={**env, "PYTEST_ADDOPTS": None})


def clover(*args, cwd, timeout=120):
    """Run `python -m clover_cli.cli ARGS` as a real subprocess."""
    return run([sys.executable, "-m", "clover_cli.cli", *args], cwd, check=False,
               env=clover_env(), timeout=timeout)


def secret_home(tmp_path, monkeypatch, key: str):
    """A $HOME holding secrets (an SSH key, a .pgpass) and the API key in the environment, as is
    and reversed: what a sandboxed install or test step must not reach."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SSH-SECRET")
    (home / ".pgpass").write_text("PGPASS-SECRET")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("SPARE_KEY_COPY", key[::-1])
    return home
