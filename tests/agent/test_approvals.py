"""Approval policy decisions, parsed-command rules and the per-repository memory (no model)."""
import json
import subprocess

import pytest

from clover_cli.agent.approvals import ApprovalPolicy, command_rule, is_read_only_command, rule_matches
from clover_cli.tools.statedir import repo_state_dir

WRITING = {"apply_patch", "edit_file", "write_file"}


def policy(tmp_path, mode, allow=()):
    return ApprovalPolicy(tmp_path, mode, allow, lambda n: n in WRITING)


def memory_file(root):
    return repo_state_dir(root, create=False) / "approvals.json"


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


def test_rules_remember_program_subcommand_and_options():
    table = {
        "pytest -q tests/x.py": "pytest -q", "python -m pytest -x": "python -m pytest -x",
        "git diff --stat HEAD": "git diff --stat", "git -C sub status": "git -C sub status",
        "git --no-pager show HEAD": "git --no-pager show", "make test": "make test",
        "touch should_not_exist": "touch", "uv run pytest -x": "uv run pytest -x",
        "npx eslint .": "npx eslint", "./run_tests.sh -v": "./run_tests.sh -v",
        "python3 tools/gen.py --x": "python3 tools/gen.py --x", "node build.js": "node build.js",
        "pytest -x -q -x": "pytest -q -x",
    }
    assert {c: command_rule(c) for c in table} == table


def test_nothing_risky_is_ever_remembered():
    never = ["git -c core.pager=cat log -1", "git --git-dir=.git --work-tree . diff", "git -C sub",
             "python -c 'import os'", "python", "python -u x.py", "python3.11 -m", "node -e 'x'",
             "perl -e 1", "bash -c 'rm -rf /'", "bash script.sh", "sh -c id", "/bin/sh -c id",
             "timeout 60 pytest", "env FOO=1 pytest", "sudo pytest", "xargs rm", "nohup make &",
             "FOO=1 pytest", "uv run python -c 1", "docker run --rm img sh", "git diff --output=x",
             "git log --out=x", "git grep -O'cmd' x", "git grep -nOvi x", "rg --pre cat x",
             "make test --eval=x", "make -E x", "find . -exec rm {} +", "git status $x", "pytest; rm x",
             "tree -o out", "git diff --ext-diff", "bwrap --bind / / sh"]
    assert {c: command_rule(c) for c in never} == {c: "" for c in never}


# Each of these would be run by a plain `git status` / `git grep` / ... prefix rule.
ESCAPES = [
    ("git status ${x:=\\$\\(touch P\\)}${x@P}", "git status"), ("git grep -O'cmd' x", "git grep"),
    ("git grep -Ocmd x", "git grep -n"), ("git diff --output=/any/path", "git diff"),
    ("git log --output=x", "git log"), ("make test --eval='X:=${shell cmd}'", "make test"),
    ("make test --eval=X", "make test"), ("git status $(touch P)", "git status"),
    ("git status `touch P`", "git status"), ("git status > P", "git status"),
    ("git status && touch P", "git status"), ("git status\ntouch P", "git status"),
    ("git status | sh", "git status"), ("git status *", "git status"), ("git status {a,b}", "git status"),
    ("git status ~/x", "git status"), ("X=1 git status", "git status"), ("git -c core.fsmonitor=id status", "git status"),
    ("git -C sub status", "git status"), ("git statusx", "git status"), ("git push --force", "git status"),
    ("pytest -q --basetemp=/x", "pytest -q"), ("pytest -x", "pytest -q"), ("(pytest -q)", "pytest -q"),
    ("cat /etc/passwd", "cat"), ("cat ../secret", "cat"), ("grep --file=/etc/shadow x", "grep --file"),
]


@pytest.mark.parametrize("command,rule", ESCAPES)
def test_rules_do_not_match_anything_beyond_their_shape(tmp_path, command, rule):
    assert not rule_matches(command, rule, tmp_path), (command, rule)
    p = policy(tmp_path, "ask", allow=(rule,))  # the rule grants nothing beyond the read-only list
    assert p.decide("run_shell", {"command": command}).verdict == ("run" if p.reads_only(command) else "ask")


def test_rules_match_the_shape_with_other_file_arguments(tmp_path):
    assert rule_matches("pytest -q tests/a.py", "pytest -q", tmp_path)
    assert rule_matches("pytest -q 'tests/b c.py'", "pytest -q", tmp_path)
    assert rule_matches("git diff --stat HEAD~1", "git diff --stat", tmp_path)
    assert rule_matches("make test", "make test", tmp_path)
    assert not rule_matches("make install", "make test", tmp_path)
    (tmp_path / "link").symlink_to("/etc/passwd")
    assert rule_matches("cat a.txt", "cat", tmp_path) and not rule_matches("cat link", "cat", tmp_path)


def _nested_repo_with_fsmonitor(root, marker):
    nested = root / "nested"
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    with open(nested / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    return nested


def test_git_in_a_nested_repository_never_matches(tmp_path):
    root = tmp_path / "repo"
    _nested_repo_with_fsmonitor(root, tmp_path / "PWNED")
    for rule in ("git status", "git -C nested status"):
        p = policy(root, "ask", allow=(rule,))
        d = p.decide("run_shell", {"command": "git -C nested status"})  # read-only sandbox or ask
        assert (d.verdict, d.sandbox) in (("ask", ""), ("run", "read-only")) and p.sandboxed() == (d.verdict == "run"), rule
    assert not is_read_only_command("git -C nested status", root)
    assert is_read_only_command("git status", root)


def test_always_memory_lives_in_the_state_folder(tmp_path):
    p = policy(tmp_path, "auto-edit", allow=("pytest -q",))
    assert p.decide("shell", {"command": "pytest -q"}).verdict == "run"
    assert p.decide("shell", {"command": "pytest -q | tee log"}).verdict == "ask"
    d = p.decide("shell", {"command": "make test"})
    assert (d.verdict, d.always_key) == ("ask", "make test")
    p.remember("shell", {"command": "make test"}, d.always_key)
    ask = policy(tmp_path, "ask")
    assert ask.decide("shell", {"command": "make test"}).verdict == "run"
    assert ask.decide("shell", {"command": "make test -j2"}).verdict == "ask"  # an option not seen
    ask.remember("edit_file", {"path": "a"}, "edit_file")
    assert policy(tmp_path, "ask").decide("edit_file", {"path": "b"}).verdict == "run"
    saved = json.loads(memory_file(tmp_path).read_text())
    assert saved["tools"] == ["edit_file"] and saved["commands"] == ["make test"]
    assert not (tmp_path / ".clover").exists()


def test_a_shipped_clover_approvals_file_is_never_read(tmp_path):
    (tmp_path / ".clover").mkdir()
    (tmp_path / ".clover" / "approvals.json").write_text(
        json.dumps({"tools": ["edit_file", "write_file"], "commands": ["rm -rf", "curl", "git push"]}))
    p = policy(tmp_path, "ask")
    assert p.decide("edit_file", {"path": "a"}).verdict == "ask"
    for command in ("curl http://x", "git push", "rm -rf x"):
        assert p.decide("shell", {"command": command}).verdict == "ask", command


def test_corrupt_memory_file_warns_and_is_kept_aside(tmp_path, caplog):
    path = memory_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    p = policy(tmp_path, "ask")
    with caplog.at_level("WARNING", logger="clover.approvals"):
        assert p.decide("shell", {"command": "make test"}).verdict == "ask"
    assert "not valid JSON" in caplog.text and str(path) in caplog.text
    p.remember("shell", {"command": "make test"}, "make test")
    assert json.loads(path.read_text())["commands"] == ["make test"]
    assert path.with_name("approvals.json.corrupt").read_text() == "{not json"
    for junk in ("[1, 2]", '{"commands": "ls"}', '{"commands": [1, null, {"a": 1}]}', "\ud800".encode("utf-8", "surrogatepass")):
        path.write_bytes(junk if isinstance(junk, bytes) else junk.encode())
        assert policy(tmp_path, "ask").decide("shell", {"command": "make test"}).verdict == "ask"


def test_always_for_wrappers_applies_once(tmp_path):
    p = policy(tmp_path, "ask")
    for command in ("bash -c 'pytest'", "timeout 5 pytest", "python -c 'print(1)'", "sudo ls", "env X=1 ls"):
        d = p.decide("shell", {"command": command})
        assert (d.verdict, d.always_key) == ("ask", ""), command
        p.remember("shell", {"command": command}, d.always_key)
    assert not memory_file(tmp_path).exists()
    assert p.decide("shell", {"command": "bash -c 'rm -rf x'"}).verdict == "ask"


def test_too_broad_rules_in_the_memory_file_are_ignored(tmp_path):
    path = memory_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"tools": [], "commands": ["git", "bash", "python", "timeout", "git status"]}))
    p = policy(tmp_path, "ask")
    assert p.decide("shell", {"command": "git status"}).verdict == "run"
    for command in ("git push --force", "bash -c id", "python -c 1", "timeout 1 rm x"):
        assert p.decide("shell", {"command": command}).verdict == "ask", command
