"""run_shell inside bubblewrap: what each profile lets a command see and change (real bwrap,
real processes). Skipped where bubblewrap cannot run; the fallback tests run everywhere."""
from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clover_cli.agent.approvals import ApprovalPolicy
from clover_cli.tools import sandbox
from clover_cli.tools.registry import run_tool
from clover_cli.tools.shell import run_shell

from .conftest import git


@pytest.fixture(autouse=True)
def _fresh_probe(fresh_sandbox):
    pass


needs_bwrap = pytest.mark.skipif(not sandbox.status().available,
                                 reason=f"no bubblewrap sandbox here: {sandbox.status().reason}")


def sh(root, command, profile, **kw):
    return run_shell(root, command, sandbox_profile=profile, **kw)


@pytest.fixture
def repo(git_repo, monkeypatch):
    """A git repository whose user's HOME (with secrets) lies inside it, the worst case for hiding."""
    home = git_repo / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY\n")
    (home / ".netrc").write_text("machine x password NETRC-PW\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("AWS-SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-SECRET")
    return git_repo


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_secrets_are_hidden(repo, profile):
    res = sh(repo, "cat ~/.ssh/id_rsa ~/.netrc ~/.aws/credentials; env; ls ~/.ssh | wc -l", profile)
    assert res.details["sandbox"] == f"bwrap:{profile}"
    for secret in ("PRIVATE-KEY", "NETRC-PW", "AWS-SECRET", "sk-ENV-SECRET"):
        assert secret not in res.output, secret
    assert (repo / "home" / ".ssh" / "id_rsa").read_text() == "PRIVATE-KEY\n"  # hidden, not touched
    assert "# demo" in sh(repo, "cat README.md", profile).output


@needs_bwrap
def test_other_processes_and_their_environment_are_unreachable(repo):
    env = {**os.environ, "CLOVER_TEST_MARK": "HOST-ENV-MARK"}
    host = subprocess.Popen(["sleep", "30"], env=env)
    try:
        res = sh(repo, "ls /proc | grep -c '^[0-9]'; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c HOST-ENV-MARK",
                 "read-only")
        counts = [int(x) for x in res.output.split("\n")[:2]]
        assert counts[0] <= 6 and counts[1] == 0, res.output
    finally:
        host.kill()
        host.wait()


@needs_bwrap
def test_read_only_profile_writes_nothing_and_has_no_network(repo):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        res = sh(repo, f"touch new.txt; echo x >> README.md; rm -f README.md; git branch junk; "
                       f"echo inside > /tmp/t.txt && cat /tmp/t.txt; (echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1 "
                       f"&& echo CONNECTED || echo NO-NET", "read-only")
        assert "NO-NET" in res.output and "CONNECTED" not in res.output
        assert "inside" in res.output and not Path("/tmp/t.txt").exists()
        assert not (repo / "new.txt").exists() and (repo / "README.md").read_text() == "# demo\n"
        assert "junk" not in git(repo, "branch", "--list")
        open_ = sh(repo, f"(echo hi > /dev/tcp/127.0.0.1/{port}) && echo CONNECTED", "workspace")
        assert "CONNECTED" in open_.output  # the workspace profile keeps the network
    finally:
        server.close()


@needs_bwrap
def test_workspace_profile_writes_the_repository_but_no_git_internals(repo):
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    before = (repo / ".git" / "config").read_text()
    res = sh(repo, "echo new > new.txt; echo hook >> .git/config; touch .git/hooks/pre-commit; "
                   "echo x >> vendor/lib/.git/config; git add new.txt; git status --short", "workspace")
    assert (repo / "new.txt").read_text() == "new\n"
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert "x" not in (nested / ".git" / "config").read_text().splitlines()
    assert "Read-only file system" in res.output and "?? new.txt" in res.output


@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_a_planted_fsmonitor_or_hook_never_runs(repo, monkeypatch, mode):
    if mode == "bwrap" and not sandbox.status().available:
        pytest.skip("no bubblewrap here")
    monkeypatch.setenv("CLOVER_SANDBOX", mode)
    nested = repo / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    marker = repo / "PWNED"
    with open(nested / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {nested}/hooks\n")
    (nested / "hooks").mkdir()
    (nested / "hooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (nested / "hooks" / "pre-commit").chmod(0o755)
    (nested / "f").write_text("x\n")
    res = sh(repo, "git -C nested add f; git -C nested status; "
                   "git -C nested -c user.name=t -c user.email=t@t commit -qm x", "workspace")
    assert not marker.exists(), res.output
    assert res.details["sandbox"] == ("bwrap:workspace" if mode == "bwrap" else "none")


@needs_bwrap
def test_children_that_call_setsid_die_with_the_sandbox(repo):
    def left() -> int:
        return subprocess.run(["pgrep", "-f", "sleep 1021.5"], capture_output=True).stdout.count(b"\n")

    res = sh(repo, "setsid sleep 1021.5 & (setsid -f sleep 1021.5 >/dev/null 2>&1) ; echo started", "workspace")
    assert res.ok and "started" in res.output and res.details["sandbox"] == "bwrap:workspace"
    slow = sh(repo, "setsid sleep 1021.5 & sleep 1021.5", "read-only", timeout=1)
    assert slow.details["timed_out"] and slow.details["sandbox"] == "bwrap:read-only"
    deadline = time.monotonic() + 30  # a hang guard: the loop ends when they are gone
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == 0


@needs_bwrap
def test_cancel_kills_a_sandboxed_command_promptly(repo):
    cancel = threading.Event()  # set once the command has printed: not a guess at bwrap's start-up time
    started = time.monotonic()
    res = sh(repo, "echo go; sleep 1022.5", "workspace", cancel=cancel,
             on_output=lambda text: "go" in text and cancel.set())
    assert res.details["cancelled"] and "go" in res.output
    assert time.monotonic() - started < 60  # a hang guard: uncancelled, it runs to its 120 s timeout


def test_fallback_says_so_once_and_runs_unconfined(plain_dir, monkeypatch):
    monkeypatch.setenv("CLOVER_SANDBOX", "off")
    first = run_tool("run_shell", {"command": "echo one"}, plain_dir)
    second = run_tool("run_shell", {"command": "echo two"}, plain_dir)
    assert first.ok and second.ok and first.details["sandbox"] == second.details["sandbox"] == "none"
    assert first.output.startswith("[no shell sandbox: the sandbox is turned off (CLOVER_SANDBOX=off)")
    assert "no shell sandbox" not in second.output
    yolo = run_shell(plain_dir, "echo three", sandbox_profile="off")
    assert "sandbox" not in yolo.output.replace("[exit code 0]", "")


def test_a_missing_bwrap_is_reported_and_required_when_forced(plain_dir, monkeypatch):
    monkeypatch.setenv("PATH", str(plain_dir))  # no bwrap (nor anything else) on PATH
    assert sandbox.status() == sandbox.Status(False, "bubblewrap (bwrap) is not installed")
    monkeypatch.setenv("CLOVER_SANDBOX", "bwrap")
    res = run_shell(plain_dir, "/bin/touch ran")
    assert not res.ok and res.details["error"] == "sandbox" and "not installed" in res.output
    assert not (plain_dir / "ran").exists()


def test_the_approval_mode_picks_the_profile(plain_dir):
    policy = ApprovalPolicy(plain_dir, "read-only")
    expect = "bwrap:read-only" if sandbox.status().available else "none"
    assert run_tool("run_shell", {"command": "true"}, plain_dir).details["sandbox"] == expect
    assert policy.sandboxed() == sandbox.status().available
    policy.mode = "yolo"
    assert run_tool("run_shell", {"command": "true"}, plain_dir).details["sandbox"] == "none"
    assert not policy.sandboxed()
    policy.mode = "auto-edit"
    expect = "bwrap:workspace" if sandbox.status().available else "none"
    assert run_tool("run_shell", {"command": "true"}, plain_dir).details["sandbox"] == expect
    del policy
    import gc
    gc.collect()
    assert sandbox.profile_for(plain_dir) == "workspace"


def test_git_hardening_keeps_the_users_own_command_scope_config():
    env = sandbox.command_env({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name",
                               "GIT_CONFIG_VALUE_0": "me"}, "workspace")
    assert env["GIT_CONFIG_COUNT"] == "3" and env["GIT_CONFIG_KEY_0"] == "user.name"
    assert {env["GIT_CONFIG_KEY_1"]: env["GIT_CONFIG_VALUE_1"], env["GIT_CONFIG_KEY_2"]: env["GIT_CONFIG_VALUE_2"]} == {
        "core.fsmonitor": "false", "core.hooksPath": "/dev/null"}
    assert "GIT_CONFIG_COUNT" not in sandbox.command_env({}, "off")


def test_clovers_own_git_never_runs_a_planted_fsmonitor_or_hook(git_repo):
    from clover_cli.tools.gitutil import git_run
    marker = git_repo / "PWNED"
    with open(git_repo / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    hook = git_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (git_repo / "README.md").write_text("changed\n")
    git_run(git_repo, "status")
    git_run(git_repo, "commit", "-qam", "x", env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                                  "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    assert not marker.exists()


@pytest.mark.timeout(60)  # a hang guard: a quadratic scan of the 600 kB command would not end
def test_odd_arguments_are_refused_quickly_not_crashed(tmp_path):
    from clover_cli.agent.approvals import rule_matches
    from clover_cli.agent.readonly import is_read_only_command
    for command in ("cat 'a\x00b'", "cat " + "a/" * 300_000, "cat " + "a/" * 3000, "git -C 'x\x00y' status",
                    "cat -f" + "/x" * 3000):
        assert not is_read_only_command(command, tmp_path), command[:40]
        assert not rule_matches(command, "cat", tmp_path) and not rule_matches(command, "git -C status", tmp_path)


@needs_bwrap
def test_a_repository_created_inside_the_sandbox_is_moved_aside(plain_dir):
    marker = plain_dir / "PWNED"
    res = sh(plain_dir, "git init -q . && git config filter.x.clean 'touch PWNED; cat' && "
                        "echo '* filter=x' > .gitattributes && echo made", "workspace")
    assert "made" in res.output and "moved to .git.sandbox-" in res.output
    assert not (plain_dir / ".git").exists()
    assert [p.name.startswith(".git.sandbox-") for p in plain_dir.iterdir() if p.name.startswith(".git.")] == [True]
    from clover_cli.tools.gitutil import is_git_repo
    assert not is_git_repo(plain_dir) and not marker.exists()
    plain = sh(plain_dir, "echo fine", "workspace")
    assert "moved" not in plain.output


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_a_virtual_environment_under_tmp_stays_runnable(git_repo, tmp_path, monkeypatch, profile):
    """The private /tmp hides everything under the host's /tmp, but not the active virtual
    environment (a CI clone's .venv under /tmp runs the repository's tests in `clover fix`)."""
    venv = tmp_path / "elsewhere" / ".venv"
    (venv / "bin").mkdir(parents=True)
    tool = venv / "bin" / "hello"
    tool.write_text("#!/bin/sh\necho from-the-venv\n")
    tool.chmod(0o755)
    (tmp_path / "elsewhere" / "other.txt").write_text("not for the sandbox\n")
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    out = sh(git_repo, f"{tool}; cat {tmp_path / 'elsewhere' / 'other.txt'}", profile)
    assert "from-the-venv" in out.output
    assert "not for the sandbox" not in out.output  # only the environment comes back, read-only
    assert not sh(git_repo, f"touch {venv}/bin/planted", profile).ok or not (venv / "bin" / "planted").exists()
    assert not (venv / "bin" / "planted").exists()
