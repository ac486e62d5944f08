"""A hand-edited session file is validated when it is resumed: a message with an unknown or
missing role, content that is a number or an object, a tool call without an id, `tool_calls`
that are not a list are skipped with one notice and the rest resumes; a `reset` record of 50,000
messages is cut to the latest MAX_RESTORED, and compacting it into a 2,048-token window does a
bounded amount of work (docs/agent.md, "Sessions")."""
from __future__ import annotations

import json

import pytest
from in_process import clover

from clover_cli.agent.session import MAX_RESTORED, load_messages, sessions_dir

from .helpers import make_repo, replay


def _session(tmp_path, repo) -> "Path":
    p = clover("run", "first task", "--model", replay(tmp_path, ["First answer."], "first.json"),
               "--root", str(repo))
    assert p.returncode == 0, p.stderr
    (path,) = sessions_dir(repo).glob("*.jsonl")
    return path


def _append(path, *messages) -> None:
    with open(path, "a") as fh:
        for m in messages:
            fh.write(json.dumps({"type": "message", "message": m}) + "\n")


BROKEN = [
    {"role": "wizard", "content": "an unknown role"},
    {"content": "no role at all"},
    {"role": "user", "content": 42},
    {"role": "user", "content": {"nested": "object"}},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "read_file"}}]},
    {"role": "assistant", "content": "", "tool_calls": {"id": "c1", "function": {"name": "read_file"}}},
    {"role": "tool", "tool_call_id": "never-called", "content": "an orphan result"},
]


def test_a_hand_edited_session_skips_what_it_cannot_understand_with_one_notice(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    path = _session(tmp_path, repo)
    good_call = {"role": "assistant", "content": "Looking.", "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"calc.py\"}"}}]}
    good_result = {"role": "tool", "tool_call_id": "c9", "name": "read_file", "content": "def add(a, b):"}
    _append(path, *BROKEN, good_call, good_result, {"role": "user", "content": [{"type": "text", "text": "parts"}]})
    problems: list[str] = []
    _, messages, _ = load_messages(path, problems)
    assert problems == [f"session {path.stem}: skipped {len(BROKEN)} messages it could not understand "
                        "(a role, content or tool call of the wrong shape)"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    assert messages[-1]["content"] == "parts"
    assert all(isinstance(m["content"], str) for m in messages)
    p = clover("run", "next task", "--continue", "--json", "--model",
               replay(tmp_path, ["Resumed."], "second.json"), "--root", str(repo))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.count("could not understand") == 1
    assert json.loads(p.stdout.splitlines()[-1])["final_text"] == "Resumed."


@pytest.mark.timeout(60)
def test_a_reset_of_50000_messages_resumes_into_a_tiny_window(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    path = _session(tmp_path, repo)
    huge = [{"role": "system", "content": "old system"}]
    for i in range(25_000):
        huge += [{"role": "user", "content": f"question {i} " + "x" * 40},
                 {"role": "assistant", "content": f"answer {i} " + "y" * 40}]
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "reset", "messages": huge}) + "\n")
    _, messages, _ = load_messages(path, [])
    assert len(messages) == MAX_RESTORED and messages[-1]["content"].startswith("answer 24999")
    p = clover("run", "next task", "--continue", "--json", "--context-window", "2048", "--model",
               replay(tmp_path, ["A summary.", "Resumed.", "Resumed.", "Resumed."], "second.json"),
               "--root", str(repo))
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert "Compacting the conversation" in p.stdout + p.stderr
    assert events[-1]["type"] == "turn_end" and events[-1]["stats"]["context_tokens"] <= 2048
