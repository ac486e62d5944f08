"""A small context window (docs/agent.md, "Context window"): an attachment, a long paste or a long
tool output is cut to what fits, with a notice; compaction always leaves a request that fits."""
from __future__ import annotations

import json

import pytest

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.attachments import attach_mentions
from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import AgentError, Notice, TurnFinished
from clover_cli.agent.session import load_messages, read_records

from tests.agent.helpers import drive, make_repo, of, replay


def ten_kb_module() -> str:
    lines = ['"""Helpers made for the small-window test."""', ""]
    i = 0
    while sum(len(line) + 1 for line in lines) < 10_000:
        lines += [f"def helper_{i}(value, scale={i}):", f'    """Return value times {i} and a label."""',
                  f"    return value * scale, 'helper {i}'", ""]
        i += 1
    return "\n".join(lines)


@pytest.mark.slow
def test_a_10kb_attachment_and_three_more_questions_on_tiny(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / "formatting.py").write_text(ten_kb_module())
    backend = make_backend("tiny")
    assert backend.context_window == 4096
    agent = Agent(backend, AgentConfig(root=repo, approval="read-only", max_new_tokens=48, max_steps=2))
    window = backend.context_window
    seen = []
    for question in ["Explain @formatting.py", "What does helper_3 return?", "Any bugs?", "Summarise."]:
        full, attached = attach_mentions(question, repo)
        events = drive(agent, full, timeout=300)
        seen += events
        assert not of(events, AgentError), of(events, AgentError)
        assert events[-1].reason in ("done", "truncated", "max_steps"), events[-1]
        assert events[-1].stats["context_tokens"] <= window  # every request of the turn fit
    notices = [n.message for n in of(seen, Notice)]
    assert any(m.startswith("Cut your message to fit the 4096-token context window") for m in notices), notices
    # the session file holds the conversation the agent has and every notice the user saw
    _, saved, turns = load_messages(agent.session_path)
    assert saved == agent.messages and turns == 4
    saved_notices = [r["message"] for r in read_records(agent.session_path, "notice")]
    assert [m for m in notices if not m.startswith("Compacting")] == saved_notices
    assert "cut to fit the context window" in json.dumps([r for r in read_records(agent.session_path, "reset")])


def test_compaction_of_one_huge_message_still_fits(tmp_path):
    """The older part is a single message larger than the window: the compaction request is cut to
    fit, and when the model writes no summary the older part is dropped, never an error."""
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["", "first answer"]))
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=64, context_window=600))
    agent._messages.append({"role": "user", "content": "paste: " + "word " * 3000})  # as an old session
    agent._messages.append({"role": "assistant", "content": "ok"})
    events = drive(agent, "next question")
    assert not of(events, AgentError) and events[-1].final_text == "first answer"
    budget = 600 - 64
    for prompt in backend.prompts:  # the compaction request and the turn's request
        assert backend.count_tokens(prompt, []) <= budget
    notices = [n.message for n in of(events, Notice)]
    assert "Compacted 4 messages into 2." in notices
    assert "was dropped" in agent.messages[1]["content"] and agent.messages[1]["content"].endswith("next question")
    assert not any(m.startswith("Cut tool outputs") for m in notices)


def test_a_failed_summary_drops_the_older_part(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["a1", "a2"]))
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=64, context_window=400))
    drive(agent, "one " * 200)
    calls = backend.calls

    def broken(*a, **k):
        raise RuntimeError("boom")
    original = backend.stream
    backend.stream = lambda messages, tools, **k: broken() if not tools else original(messages, tools, **k)
    events = drive(agent, "two")
    assert not of(events, AgentError), of(events, AgentError)
    assert any("could not summarise the conversation (boom)" in n.message for n in of(events, Notice))
    assert backend.calls == calls + 1 and events[-1].final_text == "a2"


def test_no_session_file_until_something_is_sent(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["hello"]))
    agent = Agent(backend, AgentConfig(root=repo))
    agent.set_approval("auto-edit")
    assert not agent.session_path.exists()
    drive(agent, "hi")
    kinds = [r["type"] for r in read_records(agent.session_path)]
    assert kinds[:4] == ["meta", "message", "approval_mode", "turn_start"], kinds
    assert load_messages(agent.session_path)[1] == agent.messages


def test_a_failed_compact_on_demand_changes_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["a1", "a2"]))
    agent = Agent(backend, AgentConfig(root=repo))
    drive(agent, "one")
    drive(agent, "two")
    before = [dict(m) for m in agent.messages]

    def broken(*a, **k):
        raise RuntimeError("boom")
        yield
    backend.stream = broken
    events = list(agent.compact())
    assert [e.message for e in of(events, AgentError)] == ["compaction failed: boom"]
    assert agent.messages == before
