"""The agent loop with the replay backend and the real tools on real tmp repositories."""
import json
import threading

import pytest

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
from clover_cli.agent.session import sessions_dir
from clover_cli.agent.events import (AgentError, ApprovalAnswer, ApprovalRequested, BlockText, Notice,
                                     ToolCallProposed, ToolFinished, TurnFinished, TurnStarted)

from .helpers import CALC, call, drive, make_repo, new_agent, of

PATCH = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def test_multi_step_task_fixes_the_file(tmp_path):
    repo = make_repo(tmp_path / "repo")
    script = ["I will read the code first.\n" + call("read_file", path="calc.py"),
              call("grep", pattern="def add"),
              "The bug is the minus sign.\n" + call("apply_patch", patch=PATCH),
              call("run_shell", command="python3 check_calc.py"),
              "Fixed `add` in calc.py; check_calc.py passes."]
    agent = new_agent(repo, script, approval="auto-edit", shell_allow=("python3 check_calc.py",))
    events = drive(agent, "Fix the add function so check_calc.py passes.")
    assert isinstance(events[0], TurnStarted)
    end = events[-1]
    assert (end.reason, end.final_text) == ("done", "Fixed `add` in calc.py; check_calc.py passes.")
    assert [e.name for e in of(events, ToolCallProposed)] == ["read_file", "grep", "apply_patch", "run_shell"]
    results = of(events, ToolFinished)
    assert all(r.ok for r in results), [r.output for r in results]
    assert "return a - b" in results[0].output and "calc.py" in results[1].output
    assert "PASSED" in results[3].output
    assert (repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert of(events, ApprovalRequested) == []
    assert agent.changed_files == ["calc.py"]
    assert "-    return a - b\n+    return a + b\n" in agent.diff()
    assert end.stats["steps"] == 5 and end.stats["tool_calls"] == 4
    assert end.stats["context_window"] == 32768
    assert end.stats["context_tokens"] == agent.backend.count_tokens(agent.messages[:-1], agent.tools)
    text = "".join(e.text for e in of(events, BlockText) if not e.thinking)
    assert text.startswith("I will read the code first.")
    # the model saw each tool result as a tool message
    roles = [m["role"] for m in agent.messages]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 4 + ["assistant"]
    # the session trajectory holds every step
    lines = [json.loads(l) for l in agent.session_path.read_text().splitlines()]
    assert agent.session_path.parent == sessions_dir(repo)
    assert [l["type"] for l in lines].count("tool_result") == 4 and lines[-1]["type"] == "turn_end"


def test_malformed_calls_get_error_message_and_cap_ends_turn(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    bad = '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}, oops}</tool_call>'
    agent = new_agent(repo, [bad, "<tool_call>nonsense</tool_call>", bad, "never reached"])
    events = drive(agent, "read calc.py")
    end = events[-1]
    assert end.reason == "format_errors" and "3 malformed tool calls" in end.final_text
    assert of(events, AgentError)[-1].message == end.final_text
    assert agent.backend.calls == 3
    second_prompt = agent.backend.prompts[1]
    assert second_prompt[-1]["role"] == "user"
    assert second_prompt[-1]["content"].startswith("Your tool call could not be read: the tool call is not valid JSON.")
    assert '"path": "calc.py"}, oops}' in second_prompt[-1]["content"]
    assert of(events, ToolCallProposed) == []


def test_format_error_counter_resets_after_a_good_call(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    bad = "<tool_call>{broken</tool_call>"
    agent = new_agent(repo, [bad, bad, call("read_file", path="calc.py"), bad, bad, "done"])
    end = drive(agent, "go")[-1]
    assert end.reason == "done" and end.stats["format_errors"] == 4


def test_approvals_yes_no_always(tmp_path):
    repo = make_repo(tmp_path / "repo")
    script = [call("edit_file", path="calc.py", old="a - b", new="a + b"),
              call("run_shell", command="touch should_not_exist"),
              call("edit_file", path="calc.py", old="a * b", new="b * a"),
              call("edit_file", path="check_calc.py", old="PASSED", new="OK"),
              "All done."]
    agent = new_agent(repo, script, approval="ask")
    answers = [ApprovalAnswer("yes"), ApprovalAnswer("no", "do not create files with the shell"),
               ApprovalAnswer("always")]
    events = drive(agent, "fix it", answers)
    asked = of(events, ApprovalRequested)
    assert [a.name for a in asked] == ["edit_file", "run_shell", "edit_file"]  # no 4th ask: remembered
    assert "+    return a + b" in asked[0].summary and "touch should_not_exist" in asked[1].summary
    assert asked[1].always_key == "touch" and asked[2].always_key == "edit_file"
    results = of(events, ToolFinished)
    assert [r.ok for r in results] == [True, False, True, True]
    assert "declined" in results[1].output and "do not create files with the shell" in results[1].output
    assert not (repo / "should_not_exist").exists()
    assert (repo / "calc.py").read_text() == CALC.replace("a - b", "a + b").replace("a * b", "b * a")
    assert "print('OK')" in (repo / "check_calc.py").read_text()
    from clover_cli.tools.statedir import repo_state_dir
    memory = json.loads((repo_state_dir(repo) / "approvals.json").read_text())
    assert memory["tools"] == ["edit_file"]
    assert events[-1].reason == "done"
    assert any("edit_file" in n.message for n in of(events, Notice))


def test_read_only_and_protected_paths(tmp_path):
    repo = make_repo(tmp_path / "repo")
    script = [call("edit_file", path="calc.py", old="a - b", new="a + b"),
              call("run_shell", command="git status"), call("run_shell", command="rm calc.py"), "ok"]
    agent = new_agent(repo, script, approval="read-only")
    results = of(drive(agent, "look"), ToolFinished)
    assert [r.ok for r in results] == [False, True, False]
    assert "read-only mode" in results[0].output and "read-only mode" in results[2].output
    assert (repo / "calc.py").read_text() == CALC

    agent = new_agent(repo, [call("write_file", path="tests/test_x.py", content="x"),
                             call("apply_patch", patch=PATCH), "ok"],
                      approval="yolo", protected_paths=("tests", "calc.py"))
    results = of(drive(agent, "edit"), ToolFinished)
    assert [r.ok for r in results] == [False, False]
    assert "tests/test_x.py, which is protected" in results[0].output
    assert "calc.py, which is protected" in results[1].output
    assert not (repo / "tests").exists() and (repo / "calc.py").read_text() == CALC


def test_cancellation_mid_stream_leaves_conversation_consistent(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    long_text = "Thinking about the problem. " * 40 + call("write_file", path="x.txt", content="x")
    agent = new_agent(repo, [long_text, "Second turn answer."],
                      backend_opts={"chunk_chars": 8, "delay": 0.005})
    blocks = []

    def on_event(ev):
        if isinstance(ev, BlockText):
            blocks.append(ev)
            if len(blocks) == 5:
                threading.Thread(target=agent.cancel).start()

    events = drive(agent, "go", on_event=on_event)
    end = events[-1]
    assert end.reason == "cancelled"
    assert 5 <= len(blocks) < len(long_text) // 8
    assert of(events, ToolCallProposed) == [] and not (repo / "x.txt").exists()
    last = agent.messages[-1]
    assert last["role"] == "assistant" and "tool_calls" not in last
    assert last["content"].startswith("Thinking about the problem.") and last["content"] == end.final_text
    assert last.get("cut_off") is True  # marked as cut off, as a dropped connection's answer is
    # the next turn runs normally on the consistent conversation
    end2 = drive(agent, "continue")[-1]
    assert (end2.reason, end2.final_text) == ("done", "Second turn answer.")
    assert [m["role"] for m in agent.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_cancel_while_waiting_for_approval(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    agent = new_agent(repo, [call("write_file", path="x.txt", content="x"), "unused"], approval="ask")
    seen = []
    import queue as q
    out = q.Queue()
    threading.Thread(target=lambda: [out.put(e) for e in agent.run_turn("go")], daemon=True).start()
    while True:
        ev = out.get(timeout=60)  # a hang guard
        seen.append(ev)
        if isinstance(ev, ApprovalRequested):
            agent.cancel()  # never answered
        if isinstance(ev, TurnFinished):
            break
    assert seen[-1].reason == "cancelled" and not (repo / "x.txt").exists()
    assert [m["role"] for m in agent.messages][-2:] == ["assistant", "tool"]  # every call has its result


def test_max_steps_and_long_output_truncated(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / "big.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    cmd = "python3 -c \"print('x' * 30000)\""
    agent = new_agent(repo, [call("run_shell", command=cmd)] * 3, approval="yolo", max_steps=2,
                      max_output_chars=1000)
    events = drive(agent, "loop")
    assert events[-1].reason == "max_steps" and "2 model steps" in events[-1].final_text
    out = of(events, ToolFinished)[0].output
    from clover_cli.agent.events import ToolOutput
    live = "".join(e.text for e in of(events, ToolOutput) if e.call_id == of(events, ToolFinished)[0].call_id)
    assert live.count("x") == 30000  # the shell's output streamed live, uncut
    assert len(out) < 1300 and "characters of output omitted" in out


def test_agents_md_from_root_and_parents(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Outer rule: use tabs.")
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / "AGENTS.md").write_text("Inner rule: run check_calc.py.")
    agent = new_agent(repo, ["hi"])
    system = agent.messages[0]["content"]
    assert system.index("Outer rule: use tabs.") < system.index("Inner rule: run check_calc.py.")
    assert str(repo) in system


def test_unknown_tool_is_reported_to_model(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    agent = new_agent(repo, [call("launch_rockets", n=3), "ok"])
    r = of(drive(agent, "go"), ToolFinished)[0]
    assert not r.ok and "unknown tool 'launch_rockets'" in r.output


def test_config_validation(tmp_path):
    with pytest.raises(ValueError, match="approval must be one of"):
        AgentConfig(root=tmp_path, approval="maybe")
    with pytest.raises(ValueError, match="not a directory"):
        AgentConfig(root=tmp_path / "nope")
    with pytest.raises(ValueError, match="bad session id"):
        AgentConfig(root=tmp_path, session_id="../escape")


def test_cancel_stops_a_running_shell_command(tmp_path):
    import time
    repo = make_repo(tmp_path / "repo", git=False)
    script = [call("run_shell", command="echo started; sleep 300; touch late.txt") +
              call("read_file", path="calc.py"), "Second turn answer."]
    agent = new_agent(repo, script, approval="yolo", max_consecutive_errors=1)
    started = {}

    def on_event(ev):
        from clover_cli.agent.events import ToolOutput
        if isinstance(ev, ToolOutput) and "started" in ev.text and not started:
            started["t"] = time.monotonic()
            threading.Thread(target=agent.cancel).start()

    events = drive(agent, "go", on_event=on_event, timeout=120)
    took = time.monotonic() - started["t"]
    assert events[-1].reason == "cancelled" and took < 100, took  # a hang guard: uncancelled, it sleeps 300 s
    results = of(events, ToolFinished)
    assert [(r.name, r.ok) for r in results] == [("run_shell", False), ("read_file", False)]
    assert "started" in results[0].output and "cancelled" in results[0].output
    assert results[1].output.startswith("Not run")
    msgs = agent.messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in msgs[3:]] == [c["id"] for c in msgs[2]["tool_calls"]]
    time.sleep(0.3)
    assert not (repo / "late.txt").exists()
    end2 = drive(agent, "continue")[-1]
    assert (end2.reason, end2.final_text) == ("done", "Second turn answer.")


def test_cancel_during_approval_ends_cancelled_not_on_the_error_limit(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    script = [call("write_file", path="x.txt", content="x") + call("write_file", path="y.txt", content="y"),
              "unused"]
    agent = new_agent(repo, script, approval="ask", max_consecutive_errors=1)

    def on_event(ev):
        if isinstance(ev, ApprovalRequested):
            agent.cancel()  # never answered

    import queue as q
    out, seen = q.Queue(), []
    threading.Thread(target=lambda: [out.put(e) for e in agent.run_turn("go")], daemon=True).start()
    while not seen or not isinstance(seen[-1], TurnFinished):
        seen.append(out.get(timeout=60))  # a hang guard
        on_event(seen[-1])
    assert seen[-1].reason == "cancelled"
    assert [m["role"] for m in agent.messages][-3:] == ["assistant", "tool", "tool"]
    assert all("cancelled" in m["content"] for m in agent.messages[-2:])
    assert not (repo / "x.txt").exists() and not (repo / "y.txt").exists()
