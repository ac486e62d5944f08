"""Read-only mode's shell allow list: destructive and code-running commands are refused."""
import subprocess

import pytest

from clover_cli.agent.approvals import ApprovalPolicy, is_read_only_command
from clover_cli.agent.events import ToolFinished

from .helpers import call, drive, make_repo, new_agent, of

REFUSED = [
    # from the review: these ran under --approval read-only
    "git branch -D keepme", "find . -maxdepth 1 -name calc.py -fprintf pwned.txt %p",
    "git diff --output=pwned2.txt HEAD~0", "rg --pre PROGRAM x", "git branch -m new",
    "tree -o FILE", "find . -fprint0 out", "git log --output=x", 'git grep -O"sh -c id" foo', "file -C",
    # more of the same kind
    "git diff --out=x", "git diff --ext-diff", "git grep --open-files-in-pager=vi x", "git grep -nOvi x",
    "git log -p --output-directory=d", "git show --output x", "rg --pre=cat x", "rg --pre-glob '*' x",
    "tree -Ro x", "tree -R", "tree --output x", "file --compile", "file -bC",
    "find . -exec rm {} +", "find . -execdir id", "find . -ok id", "find . -delete", "find . -fls out",
    "find . '-del'ete", "find . $'-delete'", "find . \\-delete",
    "git branch newbranch", "git branch -d x", "git branch --delete x", "git branch -c a b",
    "git branch -u origin/main", "git tag v1", "git tag -d v1", "git tag -a v1 -m x",
    "git remote add o http://x", "git remote remove origin", "git remote set-url origin x",
    "git stash", "git stash pop", "git stash drop", "git stash clear", "git stash push -m x",
    "git stash show --output=x", "git config user.name x", "git config --unset a.b",
    "git config --add a.b c", "git config -e", "git config --get a.b --add c",
    "git -c core.pager=id log", "git -c diff.external=id diff", "git --git-dir=/tmp/x status",
    "git --exec-path=/tmp status", "git commit -m x", "git checkout .", "git reset --hard",
    "git push --force", "git gc", "git", "sed -i s/a/b/ calc.py", "sed -n 1p calc.py",
    "awk 'BEGIN{system(\"id\")}'", "python -c 'print(1)'", "/bin/ls", "FOO=1 ls", "env ls", "xargs ls",
    "find . -{delete,name} x", "git diff --{output,stat}=x", "find * -print", "git diff -- *",
    "rg --pr?=x", "tree -[o] x", "git log {a..c}", "file *",
    "ls > out", "cat a; rm b", "echo $(id)", "echo `id`", "ls | sh", "ls && rm x", "echo ${HOME}",
    "echo $HOME", "ls 'unclosed", "", "lsof", "rm -rf x", "tail -f x & rm y", "cat a\nrm b",
]
ALLOWED = [
    "ls -la src", "cat calc.py", "head -n 5 calc.py", "wc -l calc.py", "grep -rn 'add$' .", "rg -n add",
    "rg --pretty add", "find . -name '*.py' -print", "find . -type f -newer calc.py", "tree -L 2",
    "file calc.py", "stat calc.py", "du -sh .", "pwd", "echo hi", "which git", "diff a b",
    "git status", "git -C sub status", "git --no-pager log --oneline -5", "git diff HEAD --stat",
    "git diff --no-ext-diff", "git show HEAD:calc.py", "git log -p -- calc.py", "git blame calc.py",
    "git ls-files", "git grep -n add", "git rev-parse HEAD", "git branch", "git branch -a -v",
    "git branch -vv", "git branch --list 'feat*'", "git branch --show-current", "git branch --contains HEAD -a",
    "git tag", "git tag -l 'v*'", "git tag -n5 --list", "git remote -v", "git remote",
    "git remote get-url origin", "git stash list", "git stash show -p stash@{0}", "ls *.py", "cat x[12].py",
    "git diff -- '*.py'", "find . -name \\*.py", "rg -g '*.{py,md}' x", "grep -E 'a{1,3}' calc.py", "git config --list",
    "git config --get user.name", "git config --global --get-regexp alias", "git describe --tags",
]


@pytest.mark.parametrize("command", REFUSED)
def test_refused(command):
    assert not is_read_only_command(command), command


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(command):
    assert is_read_only_command(command), command


def test_policy_refuses_in_read_only_mode(tmp_path):
    p = ApprovalPolicy(tmp_path, "read-only")
    assert p.decide("run_shell", {"command": "git branch -D keepme"}).verdict == "refuse"
    assert p.decide("run_shell", {"command": "git branch"}).verdict == "run"


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_reviewer_commands_do_nothing_in_a_real_repo(tmp_path):
    repo = make_repo(tmp_path / "repo")
    _git(repo, "branch", "keepme")
    attacks = ["git branch -D keepme", "find . -maxdepth 1 -name calc.py -fprintf pwned.txt %p",
               "git diff --output=pwned2.txt HEAD~0", "git branch -m keepme renamed", "tree -o pwned3.txt",
               "git log --output=pwned4.txt"]
    script = [call("run_shell", command=c) for c in attacks] + [call("run_shell", command="git branch"), "done"]
    agent = new_agent(repo, script, approval="read-only", max_consecutive_errors=50)
    events = drive(agent, "look around")
    results = of(events, ToolFinished)
    assert [r.ok for r in results] == [False] * len(attacks) + [True]
    assert all("read-only" in r.output for r in results[:-1]), results[0].output
    assert "keepme" in results[-1].output
    assert "keepme" in _git(repo, "branch", "--list")
    assert sorted(p.name for p in repo.iterdir() if p.name.startswith("pwned")) == []


OUTSIDE = ["cat /etc/passwd", "cat /proc/self/environ", "head ../outside.txt", "cat ~/.ssh/id_rsa",
           "grep -f /etc/passwd x", "grep --file=/etc/passwd x", "cat link", "grep -R root .", "cat *",
           "rg -L root", "find -L . -name x", "tree -l", "diff -r . /etc", "git -C / status",
           "git -C nested status", "git -C nested/deeper log", "git diff --no-index /etc/passwd calc.py"]


@pytest.fixture
def no_sandbox(monkeypatch):
    from clover_cli.tools import sandbox
    monkeypatch.setenv("CLOVER_SANDBOX", "off")
    sandbox.reset_probe()
    yield
    sandbox.reset_probe()


def _nested(repo, marker):
    nested = repo / "nested"
    (nested / "deeper").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    with open(nested / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n")


def test_without_a_sandbox_read_only_commands_stay_inside_the_repository(tmp_path, no_sandbox):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "outside.txt").write_text("secret\n")
    (repo / "link").symlink_to(tmp_path / "outside.txt")
    _nested(repo, tmp_path / "PWNED")
    p = ApprovalPolicy(repo, "read-only")
    assert not p.sandboxed()
    for command in OUTSIDE:
        assert p.decide("run_shell", {"command": command}).verdict == "refuse", command
    for command in ("cat calc.py", "grep -rn add .", "git status", "git log --oneline", "ls -la", "ls *.py"):
        assert p.decide("run_shell", {"command": command}).verdict == "run", command


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_nested_repositorys_fsmonitor_never_runs_in_read_only_mode(tmp_path, monkeypatch, sandboxed):
    from clover_cli.tools import sandbox
    monkeypatch.setenv("CLOVER_SANDBOX", "auto" if sandboxed else "off")
    sandbox.reset_probe()
    if sandboxed and not sandbox.status().available:
        pytest.skip(f"no sandbox here: {sandbox.status().reason}")
    repo = make_repo(tmp_path / "repo")
    marker = repo / "PWNED"  # inside the repository: visible whether or not /tmp is private
    _nested(repo, marker)
    script = [call("run_shell", command=c) for c in ("git -C nested status", "git status", "git -C nested/deeper status")]
    agent = new_agent(repo, script + ["done"], approval="read-only", max_consecutive_errors=50)
    results = of(drive(agent, "look"), ToolFinished)
    assert len(results) == 3 and results[1].ok
    assert not marker.exists()
    if not sandboxed:
        assert not results[0].ok and "read-only" in results[0].output
    sandbox.reset_probe()
