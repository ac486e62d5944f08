"""Context budget (elision, compaction) and session files (resume)."""
import json

import pytest

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import Notice, ToolFinished
from clover_cli.agent.session import SessionError
from clover_cli.tools.statedir import repo_state_dir

from .helpers import call, drive, make_repo, new_agent, of, replay

TASK = "Summarise big1.txt, big2.txt and big3.txt for me (keep this exact task)."


def _repo_with_big_files(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    for i in (1, 2, 3, 4):
        (repo / f"big{i}.txt").write_text("".join(f"row {i}-{n} " + "z" * 40 + "\n" for n in range(40)))
    return repo


def test_compaction_keeps_the_task(tmp_path):
    repo = _repo_with_big_files(tmp_path)
    script = [call("read_file", path="big1.txt"), call("read_file", path="big2.txt"),
              call("read_file", path="big3.txt"),
              "SUMMARY: read big1 and big2; both hold rows of z.",
              "All three files hold rows of z."]
    agent = new_agent(repo, script, max_new_tokens=64)
    base = agent.backend.count_tokens(agent.messages, agent.tools)
    agent.config.context_window = base + 1400  # room for two file outputs (~570 tokens each), not three
    events = drive(agent, TASK)
    assert events[-1].reason == "done" and events[-1].final_text == "All three files hold rows of z."
    notices = [n.message for n in of(events, Notice)]
    assert any(m.startswith("Compacted") for m in notices), notices
    compaction_request = agent.backend.prompts[3]
    assert compaction_request[-1]["content"].startswith("The conversation above is getting too long")
    msgs = agent.messages
    assert msgs[0]["role"] == "system"
    assert "SUMMARY: read big1 and big2" in msgs[1]["content"] and TASK in msgs[1]["content"]
    assert [m["role"] for m in msgs[2:]] == ["assistant", "tool", "assistant"]
    assert "row 3-0" in msgs[3]["content"]  # the latest state survives
    final_prompt = agent.backend.prompts[4]
    assert any(TASK in m["content"] for m in final_prompt if m["role"] == "user")
    assert agent.backend.count_tokens(final_prompt, agent.tools) <= agent.config.context_window


def test_elision_of_old_tool_outputs_first(tmp_path):
    repo = _repo_with_big_files(tmp_path)
    script = [call("read_file", path=f"big{i}.txt") for i in (1, 2, 3)] + ["done reading"]
    agent = new_agent(repo, script, max_new_tokens=64, keep_recent_tool_outputs=1)
    base = agent.backend.count_tokens(agent.messages, agent.tools)
    agent.config.context_window = base + 1400
    events = drive(agent, TASK)
    assert events[-1].reason == "done"
    assert any("Elided" in n.message for n in of(events, Notice))
    assert not any(n.message.startswith("Compacted") for n in of(events, Notice))
    tools = [m for m in agent.messages if m["role"] == "tool"]
    assert "elided to save context" in tools[0]["content"] and "row 3-0" in tools[-1]["content"]
    assert agent.messages[1]["content"] == TASK


def test_manual_compact(tmp_path):
    repo = _repo_with_big_files(tmp_path)
    agent = new_agent(repo, ["first answer", "the summary"])
    drive(agent, "first task")
    events = list(agent.compact())
    assert events[-1].message.startswith("Compacted")
    assert "the summary" in agent.messages[1]["content"] and "first task" in agent.messages[1]["content"]


def test_session_resume_last_and_by_id(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("read_file", path="calc.py"), "It subtracts.", "Second answer."])
    backend = make_backend(spec)
    agent = Agent(backend, AgentConfig(root=repo))
    drive(agent, "what does add do?")
    first_messages, sid = agent.messages, agent.session_id
    assert agent.session_path == repo_state_dir(repo, "sessions") / f"{sid}.jsonl"
    assert not (repo / ".clover").exists()  # nothing of Clover's state lands in the repository

    resumed = Agent.resume(backend, AgentConfig(root=repo), "last")
    assert resumed.session_id == sid and resumed.messages == first_messages
    assert resumed.turns == 1
    end = drive(resumed, "and then?")[-1]
    assert end.final_text == "Second answer."
    assert backend.prompts[-1][:len(first_messages)] == first_messages  # history went to the model

    again = Agent.resume(backend, AgentConfig(root=repo), sid)
    assert [m["content"] for m in again.messages][-2:] == ["and then?", "Second answer."]
    with pytest.raises(SessionError, match="no session 'nope'"):
        Agent.resume(backend, AgentConfig(root=repo), "nope")
    with pytest.raises(SessionError, match="no session to continue"):
        Agent.resume(backend, AgentConfig(root=tmp_path), "last")


def test_resume_after_compaction_and_clear_and_torn_line(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["a1", "summary text", "a2"]))
    agent = Agent(backend, AgentConfig(root=repo))
    drive(agent, "task one")
    list(agent.compact())
    compacted = agent.messages
    with open(agent.session_path, "a") as f:
        f.write('{"type": "message", "mess')  # a crash mid-write
    resumed = Agent.resume(backend, AgentConfig(root=repo), agent.session_id)
    assert resumed.messages == compacted
    resumed.clear()
    assert [m["role"] for m in Agent.resume(backend, AgentConfig(root=repo), "last").messages] == ["system"]


def test_diff_survives_resume(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, [call("edit_file", path="calc.py", old="a - b", new="a + b"), "ok"]))
    agent = Agent(backend, AgentConfig(root=repo, approval="auto-edit"))
    drive(agent, "fix")
    resumed = Agent.resume(backend, AgentConfig(root=repo), "last")
    assert resumed.changed_files == ["calc.py"] and "+    return a + b" in resumed.diff()
    undo = resumed.undo()
    assert undo.ok and "a - b" in (repo / "calc.py").read_text() and resumed.changed_files == []


def test_last_resort_cuts_a_huge_latest_output(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / "huge.txt").write_text("".join(f"line {n} " + "q" * 60 + "\n" for n in range(150)))
    agent = new_agent(repo, [call("read_file", path="huge.txt"), "summary", "finished"],
                      max_new_tokens=64, max_output_chars=100000)
    base = agent.backend.count_tokens(agent.messages, agent.tools)
    agent.config.context_window = base + 600  # one read is ~2500 tokens: more than the whole budget
    events = drive(agent, TASK)
    assert events[-1].reason == "done" and events[-1].final_text == "finished"
    assert any(n.message.startswith("Cut the read_file output to fit") for n in of(events, Notice))
    assert agent.backend.count_tokens(agent.backend.prompts[-1], agent.tools) <= agent.config.context_window
    tool = [m for m in agent.messages if m["role"] == "tool"][-1]
    assert "line 0 " in tool["content"] and "line 149 " in tool["content"] and "cut to fit the context window" in tool["content"]


def test_a_shipped_session_is_never_resumed(tmp_path):
    """`.clover/sessions/*.jsonl` inside a cloned repository is not Clover's state: --continue
    never finds it, so its records can neither seed the conversation nor point diff() anywhere."""
    repo = make_repo(tmp_path / "repo", git=False)
    shipped = repo / ".clover" / "sessions"
    shipped.mkdir(parents=True)
    (shipped / "20990101-000000-aaaaaa.jsonl").write_text(
        json.dumps({"type": "message", "message": {"role": "user", "content": "FORGED"}}) + "\n"
        + json.dumps({"type": "original", "path": "../secret.txt", "content": "x"}) + "\n")
    backend = make_backend(replay(tmp_path, ["hi"]))
    with pytest.raises(SessionError, match="no session to continue"):
        Agent.resume(backend, AgentConfig(root=repo), "last")
    with pytest.raises(SessionError, match="no session"):
        Agent.resume(backend, AgentConfig(root=repo), "20990101-000000-aaaaaa")


def test_forged_session_records_never_reach_outside_the_root(tmp_path):
    """Paths read back from a session ("original" records) are validated: `..`, absolute
    paths, `.git/`, a symlinked directory leading out and non-string paths are all ignored."""
    repo = make_repo(tmp_path / "repo", git=False)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    (repo / "out").symlink_to(tmp_path)
    backend = make_backend(replay(tmp_path, ["a1", "a2"]))
    agent = Agent(backend, AgentConfig(root=repo))
    drive(agent, "hello")
    forged = [{"type": "original", "path": p, "content": ""} for p in
              ("../secret.txt", str(secret), "out/secret.txt", ".git/config", "a/../../secret.txt")]
    forged.append({"type": "original", "path": ["not", "a", "path"], "content": ""})
    forged.append({"type": "original", "path": "calc.py", "content": 5})
    with open(agent.session_path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in forged))
    resumed = Agent.resume(backend, AgentConfig(root=repo), "last")
    assert resumed.changed_files == [] and "SECRET" not in resumed.diff()


def test_session_lines_with_bad_utf8_or_surrogates(tmp_path, capsys):
    """Invalid UTF-8 and lines that are not JSON objects are skipped with one report line; a
    record with lone surrogates is written and read back without an exception."""
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(replay(tmp_path, ["a1", "a2"]))
    agent = Agent(backend, AgentConfig(root=repo))
    drive(agent, "task \ud800 with a lone surrogate")
    with open(agent.session_path, "ab") as f:
        f.write(b'{"type": "message", "message": {"role": "user", "content": "\xff\xfe"}}\n')
        f.write(b"[1, 2]\n" + b"\x80garbage\n")
        f.write(b'{"type": "original", "path": "calc.py", "content": "\xc3"}\n')
    resumed = Agent.resume(backend, AgentConfig(root=repo), "last")
    users = [m["content"] for m in resumed.messages if m["role"] == "user"]
    assert users == ["task \ufffd with a lone surrogate"]
    err = capsys.readouterr().err
    assert "skipped 4 unreadable lines" in err and err.count("\n") == 1
    end = drive(resumed, "next")[-1]
    assert end.final_text == "a2"
