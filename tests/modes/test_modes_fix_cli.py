"""`clover fix`: real repo, real pytest, the replay backend playing the agent. The command runs
in-process (click's CliRunner); one case runs the real `python -m clover_cli.cli` process."""
from __future__ import annotations

import json
import sys

import pytest

from clover_cli.agent.session import sessions_dir
from clover_cli.trust import TrustStore

from modes_helpers import (BUGGY, FIXED, TEST_ADD, clover_env, clover_in_process, git, run,
                          tool_call, write_replay)

pytestmark = pytest.mark.slow
TEST = "tests/test_add.py::test_add"


def _pytest_passes(repo) -> bool:
    return run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST], repo,
               check=False).returncode == 0


def test_fix_makes_the_test_pass_and_undo_reverts(calc_repo, tmp_path):
    repo, base = calc_repo
    (repo / "notes.txt").write_text("the user's own untracked work\n")
    replay = write_replay(tmp_path / "r.json", [
        "The bug is in add(). " + tool_call("edit_file", path="calc.py", old="return a - b", new="return a + b"),
        "Fixed: add() adds now."])
    assert not _pytest_passes(repo)
    proc = clover_in_process("fix", TEST, "--model", f"replay:{replay}", "--root", str(repo))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-    return a - b\n+    return a + b" in proc.stdout
    assert f"PASSED after 1 attempt(s)" in proc.stdout
    assert (repo / "calc.py").read_text() == FIXED and _pytest_passes(repo)
    assert git(repo, "rev-parse", "HEAD") == base            # no commits made
    assert "notes.txt" not in proc.stdout                       # only what changed during the fix
    assert git(repo, "status", "--porcelain") == "M calc.py\n?? notes.txt"   # .clover/ ignores itself

    undo = clover_in_process("undo", "--root", str(repo))
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (repo / "calc.py").read_text() == BUGGY


def test_edits_to_the_test_are_refused_and_reverted(calc_repo, tmp_path):
    repo, _ = calc_repo
    replay = write_replay(tmp_path / "cheat.json", [
        tool_call("edit_file", path="tests/test_add.py", old="== 5", new="== -1"),
        tool_call("run_shell", command="sed -i 's/== 5/== -1/' tests/test_add.py"),
        tool_call("write_file", path="tests/conftest.py", content="collect_ignore = ['test_add.py']\n"),
        "The test passes now."])
    proc = clover_in_process("fix", TEST, "--model", f"replay:{replay}", "--root", str(repo), "--attempts", "1",
                             "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and result["passed"] is False and result["attempts"] == 1
    assert result["reverted_test_edits"] == ["tests/test_add.py"]      # the shell edit, put back
    configs = ["pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"]
    assert result["protected"] == ["tests/test_add.py", "tests/conftest.py", *[f"tests/{c}" for c in configs],
                                   "conftest.py", *configs]
    assert result["diff"] == ""
    assert "FAILED edit_file" in proc.stderr and "FAILED write_file" in proc.stderr
    assert (repo / "tests" / "test_add.py").read_text() == TEST_ADD
    assert not (repo / "tests" / "conftest.py").exists()
    assert (repo / "calc.py").read_text() == BUGGY


def test_failure_goes_back_to_the_agent_for_another_attempt(calc_repo, tmp_path):
    repo, _ = calc_repo
    replay = write_replay(tmp_path / "r.json", [
        tool_call("edit_file", path="calc.py", old="return a - b", new="return b - a"),
        "Swapped the operands.",
        tool_call("edit_file", path="calc.py", old="return b - a", new="return a + b"),
        "Now it adds."])
    proc = clover_in_process("fix", TEST, "--model", f"replay:{replay}", "--root", str(repo), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "fixed" and result["attempts"] == 2
    assert result["changed_files"] == ["calc.py"]
    session = (sessions_dir(repo) / f"{result['session_id']}.jsonl").read_text()
    assert "attempt 2 of 3" in session and "assert -1 == 5" in session   # the re-run's failure output


def test_already_passing_bad_input_and_exhausted_attempts(calc_repo, tmp_path):
    repo, _ = calc_repo
    missing = f"replay:{tmp_path / 'never-loaded.json'}"
    ok = clover_in_process("fix", "tests/test_mul.py", "--model", missing, "--root", str(repo))
    assert ok.returncode == 0 and "already passes" in ok.stdout

    for args, needle in [(["--attempts", "0"], "--attempts"),
                         (["--model", str(tmp_path / "no-such-dir")], "unknown model spec"),
                         (["--model", missing], "cannot load model"),
                         (["--root", str(tmp_path / "nowhere")], "is not a directory"),
                         (["--test-cmd", "no-such-program-xyz {test}"], "not found")]:
        proc = clover_in_process("fix", TEST, "--root", str(repo), *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, proc.stderr)

    unknown = clover_in_process("fix", "tests/test_add.py::test_nope", "--root", str(repo))
    assert unknown.returncode == 2 and "pytest could not run" in unknown.stderr

    idle = write_replay(tmp_path / "idle.json", ["I cannot find the bug."])
    proc = clover_in_process("fix", TEST, "--model", f"replay:{idle}", "--root", str(repo), "--attempts", "2")
    assert proc.returncode == 1
    assert "(no changes)" in proc.stdout and "FAILED after 2 attempt(s)" in proc.stdout


def test_project_config_test_cmd(calc_repo, tmp_path):
    repo, _ = calc_repo
    (repo / ".clover").mkdir(exist_ok=True)
    marker = repo / "ran.txt"  # the test command runs in the workspace sandbox: the repository is writable
    (repo / ".clover" / "config.toml").write_text(
        f'test_cmd = "{sys.executable} -c \\"import sys, pathlib; pathlib.Path(r\'{marker}\').write_text(sys.argv[1])\\" {{test}}"\n')
    proc = clover_in_process("fix", "tests/test_mul.py", "--root", str(repo))
    assert proc.returncode == 0 and not marker.exists(), proc.stderr  # untrusted: the default command
    assert "not trusted" in proc.stderr
    TrustStore().set(repo, True)
    proc = clover_in_process("fix", "tests/test_mul.py", "--root", str(repo))
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "tests/test_mul.py"


def test_outside_git_with_a_k_expression_and_the_group_root_option(calc_repo, tmp_path):
    import shutil

    repo, _ = calc_repo
    shutil.rmtree(repo / ".git")
    replay = write_replay(tmp_path / "r.json", [
        tool_call("edit_file", path="calc.py", old="return a - b", new="return a + b"), "Fixed."])
    proc = run([sys.executable, "-m", "clover_cli.cli", "--root", str(repo), "fix", "--model", f"replay:{replay}",
                "--json", "--", "-k add"], tmp_path, check=False, env=clover_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["command"][-2:] == ["-k", "add"]
    assert "+    return a + b" in result["diff"] and result["changed_files"] == ["calc.py"]
    assert result["protected"] == ["conftest.py", "tests/test_add.py", "tests/test_mul.py", "pytest.ini",
                                   ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"]


def test_a_failure_says_what_each_malformed_call_tried_and_where_the_test_stands(calc_repo, tmp_path):
    repo, _ = calc_repo
    replay = write_replay(tmp_path / "bad.json", [
        '<tool_call>{"name": "edit_file", "arguments": {"path": "calc.py" "old": 1}}</tool_call>',
        '<tool_call>{"name": "read_file" "x"}</tool_call>',
        "<tool_call>[1, 2]</tool_call>"])
    proc = clover_in_process("fix", TEST, "--model", f"replay:{replay}", "--root", str(repo), "--attempts", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Attempt 1: the turn ended (format errors) after 0 tool call(s)." in out
    assert "the model wrote 3 malformed tool calls in a row" in out
    lines = [ln.strip() for ln in out.splitlines()]
    tried = [ln for ln in lines if ln[:3] in ("1. ", "2. ", "3. ")]
    assert [t.split(":")[0] for t in tried] == ["1. edit_file", "2. read_file", "3. a call naming no tool"], out
    assert all("(wrote: " in t for t in tried)
    assert "The test still fails: " in out and "FAILED after 1 attempt(s)" in out
    assert proc.stderr.count("note: Tool call not run: ") == 3
