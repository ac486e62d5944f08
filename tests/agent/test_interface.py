"""The typed agent interface for front ends (clover_cli/agent/interface.py; docs/design.md,
Boundaries: tui -> agent only): a real Agent on the replay backend has every AgentSession member
and each does its job; the TUI's source uses nothing of an agent outside the protocol and never
touches a backend."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from clover_cli.agent import Agent, AgentConfig, AgentSession
from clover_cli.agent.backends.replay import ReplayBackend
from clover_cli.agent.config import DEFAULT_THRESHOLD
from clover_cli.agent.driver import TurnDriver
from clover_cli.agent.events import TurnFinished
from clover_cli.agent.interface import repo_branch, repo_files, state_file
from clover_cli.agent.session import SessionError

from .helpers import call, drive, make_repo, new_agent

TUI = Path(__file__).resolve().parents[2] / "clover_cli" / "tui"


def protocol_members() -> set[str]:
    """The names AgentSession declares (methods, properties and annotated attributes)."""
    names = set(AgentSession.__annotations__)
    names |= {n for n in vars(AgentSession) if not n.startswith("_")}
    return names


class ProtocolView:
    """An agent seen through AgentSession alone, as a front end holds it: reading anything the
    protocol does not declare is an AttributeError."""

    def __init__(self, agent):
        self._agent = agent

    def __getattr__(self, name):
        if name not in protocol_members():
            raise AttributeError(f"{name} is not an AgentSession member")
        return getattr(self._agent, name)


def test_a_front_end_does_its_job_through_the_protocol_alone(tmp_path):
    """A turn that edits, then what the TUI's commands do after it (/diff, /undo, /clear, the
    status bar, /resume, quit), each through AgentSession members only, each with its effect."""
    repo = make_repo(tmp_path / "repo")
    view = ProtocolView(new_agent(repo, [call("edit_file", path="calc.py", old="a - b", new="a + b"),
                                         "Fixed."]))
    with pytest.raises(AttributeError):
        view.backend
    view.set_approval("auto-edit")
    assert drive(view, "fix add")[-1].final_text == "Fixed."
    assert view.changed_files == ["calc.py"] and "+    return a + b" in view.diff()
    assert view.model_info()["name"].startswith("replay:") and view.context_tokens() > 0
    assert view.session_path.name == f"{view.session_id}.jsonl" and view.session_path.is_file()
    assert view.undo().ok and "a - b" in (repo / "calc.py").read_text() and view.changed_files == []
    again = view.reopen(view.session_id)
    assert [m["content"] for m in again.messages if m["role"] == "user"] == ["fix add"]
    view.clear()
    assert [m["role"] for m in view.messages] == ["system"]
    assert [m["role"] for m in view.reopen(view.session_id).messages] == ["system"]  # the clear is saved
    again.close()


def test_a_real_agent_has_every_member_of_the_protocol(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), ["Hello."])
    assert isinstance(agent, AgentSession)
    missing = [name for name in sorted(protocol_members()) if not hasattr(agent, name)]
    assert missing == []
    for name in protocol_members() - {"session_id"}:  # methods stay methods, properties properties
        declared = getattr(AgentSession, name)
        if callable(declared):
            assert callable(getattr(agent, name)), name


def test_model_info_threshold_and_context_tokens_go_through_the_agent(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), ["Hello there."])
    info = agent.model_info()
    assert info["threshold"] == DEFAULT_THRESHOLD and info["context_window"] == 32768
    assert info["name"].startswith("replay:")
    assert agent.set_threshold(0.7) == 0.7
    assert agent.model_info()["threshold"] == 0.7
    for bad in (0, 1.5, float("nan"), "0.5"):  # the engine's one (0, 1] check
        with pytest.raises(ValueError, match="threshold must be"):
            agent.set_threshold(bad)
    assert agent.model_info()["threshold"] == 0.7
    before = agent.context_tokens()
    assert isinstance(before, int) and before > 0
    drive(agent, "say hello " * 50)
    assert agent.context_tokens() > before


def test_approval_and_repo_branch(tmp_path):
    agent = new_agent(make_repo(tmp_path / "repo"), [])
    assert agent.approval == "ask"
    agent.set_approval("yolo")
    assert agent.approval == "yolo"
    with pytest.raises(ValueError):
        agent.set_approval("everything")
    branch = subprocess.run(["git", "branch", "--show-current"], cwd=agent.root, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert branch and agent.repo_branch() == branch == repo_branch(agent.root)
    plain = new_agent(make_repo(tmp_path / "plain", git=False), [])
    assert plain.repo_branch() is None


def test_reopen_resumes_another_session_on_the_same_model(tmp_path):
    first = new_agent(make_repo(tmp_path / "repo"), ["First answer.", "Second answer."])
    assert drive(first, "first question")[-1].reason == "done"
    other = first.reopen(first.session_id)
    assert other is not first and other.session_id == first.session_id
    assert other.backend is first.backend  # the model is not loaded again
    assert [m["content"] for m in other.messages if m["role"] == "user"] == ["first question"]
    end = drive(other, "second question")[-1]
    assert isinstance(end, TurnFinished) and end.final_text == "Second answer."
    with pytest.raises(SessionError):
        first.reopen("no-such-session")


class CountingReplay(ReplayBackend):
    """The replay backend, counting close() calls (the real one has nothing to release)."""

    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_close_keeps_a_model_its_successor_shares(tmp_path):
    repo = make_repo(tmp_path / "repo")
    script = tmp_path / "s.json"
    script.write_text('{"completions": []}')
    backend = CountingReplay(script)
    agent = Agent(backend, AgentConfig(root=repo))
    successor = agent.reopen(agent.session_id)
    agent.close(successor=successor)
    assert backend.closed == 0
    successor.close(successor=Agent(CountingReplay(script), AgentConfig(root=repo)))
    assert backend.closed == 1
    successor.close()
    assert backend.closed == 2


def test_repository_facts_for_front_ends(tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert repo_files(repo) == ["calc.py", "check_calc.py"]
    assert repo_files(tmp_path / "missing") == []
    path = state_file(repo, "copied.txt")
    assert path.parent.is_dir() and repo not in path.parents  # Clover's state lives outside the repo


# -- the TUI's side ---------------------------------------------------------------------------------
def _tui_sources() -> list[Path]:
    files = sorted(TUI.rglob("*.py"))
    assert len(files) > 10
    return files


def test_the_tui_never_touches_a_backend_or_the_tools():
    found = []
    for path in _tui_sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\.backend\b|\bclover_cli\.tools\b|getattr\([^)]*['\"]backend['\"]", line):
                found.append(f"{path.relative_to(TUI)}:{n}: {line.strip()}")
    assert found == []


def test_the_tui_uses_only_agent_session_members():
    """Every attribute the TUI reads on an agent (`agent.x`, `self.agent.x`, `msg.agent.x`,
    `reuse.x`) is declared by AgentSession."""
    members = protocol_members()
    used: dict[str, str] = {}
    for path in _tui_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id in ("agent", "reuse")) or \
                    (isinstance(owner, ast.Attribute) and owner.attr == "agent"):
                used.setdefault(node.attr, f"{path.relative_to(TUI)}:{node.lineno}")
    outside = {name: where for name, where in used.items() if name not in members}
    assert outside == {}
    assert {"compact", "model_info", "set_threshold", "context_tokens", "repo_branch"} <= set(used)


# -- compaction as a front end runs it (/compact on the turn driver) --------------------------------
def _three_turns(tmp_path, summary: str, **backend_opts):
    agent = new_agent(make_repo(tmp_path / "repo"), ["one", "two", "three", summary],
                      backend_opts=backend_opts)
    for text in ("q1", "q2", "q3"):
        assert drive(agent, text)[-1].reason == "done"
    return agent


def test_compact_forgets_a_cancel_that_came_before_it(tmp_path):
    agent = _three_turns(tmp_path, "The summary.")
    agent.cancel()  # an Esc that arrived as the last turn ended
    notices = [e.message for e in TurnDriver(agent).start(source=agent.compact).events()]
    assert notices[-1].startswith("Compacted ")
    (summary,) = [m["content"] for m in agent.messages if m["role"] == "user"]
    assert "The summary." in summary and "q3" in summary


def test_cancelling_a_compaction_leaves_the_conversation_unchanged(tmp_path):
    agent = _three_turns(tmp_path, "A long summary " * 40, chunk_chars=4, delay=0.02)
    before = agent.messages
    driver = TurnDriver(agent).start(source=agent.compact)
    events = driver.events()
    assert next(events).message == "Compacting the conversation ..."
    driver.cancel()
    rest = [e.message for e in events]
    assert rest == ["Compaction cancelled; the conversation is unchanged."]
    assert agent.messages == before
    assert drive(agent, "q4")[-1].reason == "done"  # the agent goes on (the script is spent: "")


def test_compact_waits_for_no_turn(tmp_path):
    agent = _three_turns(tmp_path, "s")
    turn = agent.run_turn("q4")
    next(turn)  # the turn holds the agent
    with pytest.raises(RuntimeError, match="already running"):
        next(agent.compact())
    list(turn)
