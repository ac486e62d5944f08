"""`clover fix` guards: a pass must be proven by pytest's report, config files are part of the
test, one `clover undo` reverts the whole fix, Ctrl-C stops the agent's running command. In-process
(click's CliRunner) but for the Ctrl-C case, which needs a real process and a real signal."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from clover_cli.agent.session import sessions_dir

from modes_helpers import (BUGGY, FIXED, alive, clover_env, clover_in_process, git,
                           sigint_default, tool_call, write_replay)

pytestmark = pytest.mark.slow
TEST = "tests/test_add.py::test_add"
COLLECT_ONLY = "[pytest]\naddopts = --collect-only\n"


def _fix(repo, tmp_path, completions, *extra):
    replay = write_replay(tmp_path / "r.json", completions)
    return clover_in_process("fix", TEST, "--model", f"replay:{replay}", "--root", str(repo), "--json", *extra)


def test_exit_zero_without_running_the_test_is_not_a_pass(calc_repo, tmp_path):
    repo, _ = calc_repo
    proc = _fix(repo, tmp_path, [
        tool_call("write_file", path="calc.py", content="import os\nos._exit(0)\n"), "Done."],
        "--attempts", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["passed"] is False and result["checked"] is True
    assert result["unproven"] == "pytest wrote no test report (the run did not complete)"
    assert (repo / "calc.py").read_text() == "import os\nos._exit(0)\n"   # the agent's edit stays


def test_a_test_that_does_not_run_before_the_agent_is_bad_input(calc_repo, tmp_path):
    repo, _ = calc_repo
    (repo / "tests" / "test_skip.py").write_text("import pytest\n\n\n@pytest.mark.skip\ndef test_s():\n    pass\n")
    proc = clover_in_process("fix", "tests/test_skip.py::test_s", "--root", str(repo))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "clover fix: error: pytest exited with 0 for 'tests/test_skip.py::test_s' but no test was executed"]


def test_collect_only_config_does_not_pass_and_config_files_are_protected(calc_repo, tmp_path):
    repo, _ = calc_repo
    # allowed to edit the config: pytest's addopts are overridden, the test really runs and fails
    proc = _fix(repo, tmp_path, [tool_call("write_file", path="pytest.ini", content=COLLECT_ONLY), "Done."],
                "--attempts", "1", "--allow-test-edits")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in json.loads(proc.stdout)["test_output"]
    (repo / "pytest.ini").unlink()

    # not allowed: the tools refuse the config files and shell writes to them are put back
    proc = _fix(repo, tmp_path, [
        tool_call("write_file", path="pytest.ini", content=COLLECT_ONLY),
        tool_call("run_shell", command="printf '[tool.pytest.ini_options]\\naddopts = \"-k nothing\"\\n' > pyproject.toml"),
        "Done."], "--attempts", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    for name in ("pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "tests/pytest.ini", "tests/conftest.py"):
        assert name in result["protected"], name
    assert result["reverted_test_edits"] == ["pyproject.toml"]
    session = (sessions_dir(repo) / f"{result['session_id']}.jsonl").read_text()
    assert "refused and reverted: tests/test_add.py, conftest.py\\n" in session   # the model sees existing files
    assert "FAILED write_file" in proc.stderr
    assert not (repo / "pytest.ini").exists() and not (repo / "pyproject.toml").exists()


def test_one_undo_reverts_every_edit_of_the_fix(calc_repo, tmp_path):
    repo, _ = calc_repo
    readme = b"# calc\r\nno trailing newline"
    (repo / "README.md").write_bytes(readme)
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "readme")
    proc = _fix(repo, tmp_path, [
        tool_call("edit_file", path="calc.py", old="return a - b", new="return b - a"),
        tool_call("edit_file", path="README.md", old="# calc", new="# calc (fixed)"),
        tool_call("write_file", path="helpers.py", content="X = 1\n"),
        "Swapped the operands.",
        tool_call("edit_file", path="calc.py", old="return b - a", new="return a + b"),
        "Now it adds."])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["attempts"] == 2 and sorted(result["changed_files"]) == ["README.md", "calc.py", "helpers.py"]
    assert (repo / "calc.py").read_text() == FIXED

    undo = clover_in_process("undo", "--root", str(repo))
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (repo / "calc.py").read_bytes() == BUGGY.encode()
    assert (repo / "README.md").read_bytes() == readme
    assert not (repo / "helpers.py").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_ctrl_c_stops_the_agents_running_command(calc_repo, tmp_path):
    repo, _ = calc_repo
    pid_file = tmp_path / "sleep.pid"
    replay = write_replay(tmp_path / "r.json", [
        tool_call("run_shell", command=f"echo $$ > {pid_file}; exec sleep 301"), "Done."])
    proc = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", "fix", TEST, "--model", f"replay:{replay}",
                             "--root", str(repo)], cwd=tmp_path, text=True,
                            env={**clover_env(), "CLOVER_SANDBOX": "off"},  # host pids and /tmp (no sandbox)
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    sleep_pid = None
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        sleep_pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=150)  # hang guards (the command sleeps 301 s): they end
        assert proc.returncode == 130, out + err  # at the exit and at the death
        assert "interrupted" in err
        deadline = time.monotonic() + 30
        while alive(sleep_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(sleep_pid), "the agent's command outlived clover fix"
    finally:
        if proc.poll() is None:
            proc.kill()
        if sleep_pid and alive(sleep_pid):
            os.kill(sleep_pid, signal.SIGKILL)
