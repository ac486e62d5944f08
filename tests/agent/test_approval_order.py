"""The approval modes are ordered (APPROVAL_ORDER: read-only, ask, auto-edit, yolo) and the policy
is monotone along that order: for every call, a mode never gives a stricter verdict (refuse <
ask < run) than a mode before it, with and without the sandbox, with and without remembered
rules. And read-only commands run without asking in every mode (`clover run` in auto-edit once
asked about `ls`)."""
import itertools
import json

import pytest

from clover_cli.agent.approvals import ApprovalPolicy
from clover_cli.agent.config import APPROVAL_ORDER
from clover_cli.agent.events import ApprovalAnswer, ApprovalRequested, ToolFinished
from clover_cli.tools import sandbox

from .helpers import call, clover_in_process, drive, make_repo, new_agent, of, replay

WRITING = {"apply_patch", "edit_file", "write_file", "notes.save"}
RANK = {"refuse": 0, "ask": 1, "run": 2}
PROGRAMS = ["ls", "cat", "grep -rn x", "git status", "git log", "git diff", "git commit -m x",
            "git branch -D main", "find .", "rg --pre cat x", "tree -o out", "rm -rf", "pytest -q",
            "python -m pytest -x", "make test", "touch", "curl http://example.com", "echo", "wc -l"]
ARGS = ["", "src", "a.py", "/etc/passwd", "../up", "~/.ssh/id_rsa", "-delete", "--output=x",
        "$HOME", "*.py", "; rm -rf x", "| sh", "> out", "$(id)"]
TOOLS = [("read_file", {"path": "a.py"}), ("grep", {"pattern": "x"}), ("list_files", {}),
         ("repo_map", {}), ("write_file", {"path": "a.py", "content": "x"}),
         ("edit_file", {"path": "a.py", "old": "a", "new": "b"}), ("apply_patch", {"patch": ""}),
         ("notes.lookup", {"word": "x"}), ("notes.save", {"text": "x"}), ("run_tests", {"command": "ls"})]


def _calls():
    shell = [("run_shell", {"command": f"{p} {a}".strip()}) for p, a in itertools.product(PROGRAMS, ARGS)]
    return TOOLS + shell


@pytest.fixture(params=["bwrap", "off"])
def sandbox_setting(request, monkeypatch):
    if request.param == "bwrap" and not sandbox.status().available:
        pytest.skip("no usable bubblewrap here")
    monkeypatch.setenv("CLOVER_SANDBOX", request.param)
    sandbox.reset_probe()
    yield request.param
    sandbox.reset_probe()


@pytest.mark.parametrize("allow", [(), ("pytest -q", "git log")])
def test_every_mode_allows_what_every_stricter_mode_allows(tmp_path, sandbox_setting, allow):
    repo = make_repo(tmp_path / "repo")
    (repo / "src").mkdir()
    verdicts = {}
    for mode in APPROVAL_ORDER:
        policy = ApprovalPolicy(repo, mode, allow, lambda n: n in WRITING)
        verdicts[mode] = [policy.decide(name, dict(args)).verdict for name, args in _calls()]
        if allow:
            policy.remember("run_shell", {"command": "make test"}, "make test")
    breaks = [(strict, loose, _calls()[i]) for strict, loose in itertools.combinations(APPROVAL_ORDER, 2)
              for i, (a, b) in enumerate(zip(verdicts[strict], verdicts[loose])) if RANK[b] < RANK[a]]
    assert breaks == []
    ran = {mode: sum(v == "run" for v in verdicts[mode]) for mode in APPROVAL_ORDER}
    assert 0 < ran["read-only"] < ran["auto-edit"] < ran["yolo"] == len(_calls())
    assert verdicts["auto-edit"][_calls().index(("run_shell", {"command": "ls"}))] == "run"


def test_clover_run_in_auto_edit_runs_ls_without_asking(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "marker_file.txt").write_text("x\n")
    spec = replay(tmp_path, [call("run_shell", command="ls"), "Listed."])
    p = clover_in_process("run", "list", "--model", spec, "--root", str(repo), "--approval", "auto-edit", "--json")
    assert p.returncode == 0, p.stderr
    ends = [e for e in map(json.loads, p.stdout.splitlines()) if e["type"] == "tool_result"]
    assert len(ends) == 1 and ends[0]["ok"] and "marker_file.txt" in json.dumps(ends[0])


def test_read_only_commands_run_in_the_read_only_sandbox_in_auto_edit(tmp_path, sandbox_setting):
    repo = make_repo(tmp_path / "repo")
    agent = new_agent(repo, [call("run_shell", command="ls"), call("run_shell", command="touch made"), "ok"],
                      approval="auto-edit")
    events = drive(agent, "go", [ApprovalAnswer("yes")])
    done = of(events, ToolFinished)
    assert [e.ok for e in done] == [True, True] and len(of(events, ApprovalRequested)) == 1
    sandboxes = [e.details.get("sandbox") for e in done]
    assert sandboxes == (["bwrap:read-only", "bwrap:workspace"] if sandbox_setting == "bwrap" else ["none", "none"])
