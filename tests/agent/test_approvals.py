"""Approval policy decisions and the per-project memory (pure logic, no model)."""
import json

from clover_cli.agent.approvals import (ApprovalPolicy, command_prefix, is_read_only_command,
                                        prefix_matches)

WRITING = {"apply_patch", "edit_file", "write_file"}


def policy(tmp_path, mode, allow=()):
    return ApprovalPolicy(tmp_path, mode, allow, lambda n: n in WRITING)


def test_modes(tmp_path):
    edit, shell, read = ("edit_file", {"path": "a"}), ("shell", {"command": "pytest -q"}), ("read_file", {"path": "a"})
    table = {m: [policy(tmp_path, m).decide(*c).verdict for c in (edit, shell, read)]
             for m in ("ask", "auto-edit", "yolo", "read-only")}
    assert table == {"ask": ["ask", "ask", "run"], "auto-edit": ["run", "ask", "run"],
                     "yolo": ["run", "run", "run"], "read-only": ["refuse", "refuse", "run"]}
    assert "read-only" in policy(tmp_path, "read-only").decide(*edit).reason


def test_read_only_allows_read_only_commands(tmp_path):
    p = policy(tmp_path, "read-only")
    assert p.decide("shell", {"command": "git diff HEAD"}).verdict == "run"
    assert p.decide("shell", {"command": "ls -la src"}).verdict == "run"
    for bad in ("rm -rf x", "ls > out", "cat a; rm b", "find . -delete", "git commit -m x", "lsof"):
        assert p.decide("shell", {"command": bad}).verdict == "refuse", bad
    assert is_read_only_command("grep -rn foo .") and not is_read_only_command("echo $(rm x)")


def test_prefixes():
    assert command_prefix("pytest -q tests/x.py") == "pytest"
    assert command_prefix("python -m pytest -x") == "python -m pytest"
    assert command_prefix("git diff --stat") == "git diff"
    assert command_prefix("git -C x log") == "git log"
    assert prefix_matches("pytest -q", "pytest") and prefix_matches("pytest", "pytest")
    assert not prefix_matches("pytestx", "pytest")
    assert not prefix_matches("pytest && rm -rf /", "pytest")


def test_shell_allow_list_and_always_memory(tmp_path):
    p = policy(tmp_path, "auto-edit", allow=("pytest",))
    assert p.decide("shell", {"command": "pytest -q"}).verdict == "run"
    assert p.decide("shell", {"command": "pytest -q | tee log"}).verdict == "ask"
    d = p.decide("shell", {"command": "make test"})
    assert (d.verdict, d.always_key) == ("ask", "make test")
    p.remember("shell", {"command": "make test"}, d.always_key)
    ask = policy(tmp_path, "ask")
    assert ask.decide("shell", {"command": "make test -j2"}).verdict == "run"
    assert ask.decide("edit_file", {"path": "a"}).verdict == "ask"
    ask.remember("edit_file", {"path": "a"}, "edit_file")
    assert policy(tmp_path, "ask").decide("edit_file", {"path": "b"}).verdict == "run"
    saved = json.loads((tmp_path / ".clover" / "approvals.json").read_text())
    assert saved == {"tools": ["edit_file"], "commands": ["make test"]}


def test_corrupt_memory_file_is_ignored(tmp_path):
    (tmp_path / ".clover").mkdir()
    (tmp_path / ".clover" / "approvals.json").write_text("{not json")
    assert policy(tmp_path, "ask").decide("shell", {"command": "ls"}).verdict == "ask"


def test_prefixes_are_never_too_broad():
    table = {
        "git -C sub status": "git status", "git -c core.pager=cat log -1": "git log",
        "git --git-dir=.git --work-tree . diff": "git diff", "git --no-pager show HEAD": "git show",
        "git -C sub": "", "python -m pytest -q": "python -m pytest", "python3 tools/gen.py --x": "python3 tools/gen.py",
        "python -c 'import os'": "", "python": "", "python -u x.py": "", "python3.11 -m": "",
        "node -e 'x'": "", "node build.js": "node build.js", "perl -e 1": "", "ruby -e 1": "",
        "bash -c 'rm -rf /'": "", "bash script.sh": "", "sh -c id": "", "/bin/sh -c id": "",
        "timeout 60 pytest": "", "env FOO=1 pytest": "", "sudo pytest": "", "xargs rm": "",
        "nohup make &": "", "FOO=1 pytest": "", "uv run pytest -x": "uv run pytest",
        "uv run python -c 1": "", "npx eslint .": "npx eslint", "docker run --rm img sh": "",
        "make test": "make test", "pytest -q": "pytest", "./run_tests.sh -v": "./run_tests.sh",
    }
    assert {c: command_prefix(c) for c in table} == table


def test_always_for_git_with_global_options_does_not_allow_push(tmp_path):
    p = policy(tmp_path, "ask")
    d = p.decide("shell", {"command": "git -C sub status"})
    assert (d.verdict, d.always_key) == ("ask", "git status")
    p.remember("shell", {"command": "git -C sub status"}, d.always_key)
    assert p.decide("shell", {"command": "git -C sub status -s"}).verdict == "run"
    assert p.decide("shell", {"command": "git status"}).verdict == "run"
    for other in ("git push --force", "git -c core.fsmonitor=id status", "git statusx", "git -C sub push"):
        assert p.decide("shell", {"command": other}).verdict == "ask", other


def test_always_for_wrappers_applies_once(tmp_path):
    p = policy(tmp_path, "ask")
    for command in ("bash -c 'pytest'", "timeout 5 pytest", "python -c 'print(1)'", "sudo ls", "env X=1 ls"):
        d = p.decide("shell", {"command": command})
        assert (d.verdict, d.always_key) == ("ask", ""), command
        p.remember("shell", {"command": command}, d.always_key)
    assert not (tmp_path / ".clover" / "approvals.json").exists()
    assert p.decide("shell", {"command": "bash -c 'rm -rf x'"}).verdict == "ask"


def test_too_broad_entries_in_an_old_memory_file_are_ignored(tmp_path):
    (tmp_path / ".clover").mkdir()
    (tmp_path / ".clover" / "approvals.json").write_text(
        json.dumps({"tools": [], "commands": ["git", "bash", "python", "timeout", "git status"]}))
    p = policy(tmp_path, "ask")
    assert p.decide("shell", {"command": "git status"}).verdict == "run"
    for command in ("git push --force", "bash -c id", "python -c 1", "timeout 1 rm x"):
        assert p.decide("shell", {"command": command}).verdict == "ask", command
