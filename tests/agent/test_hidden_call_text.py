"""Call markup hidden while streaming is shown again, with a notice, when the model step ends
without a proposed call (docs/agent.md, "Visible text"): in `clover run` (text and --json) and ACP.
The TUI's side is tests/tui/test_tui_hidden_call.py."""
from __future__ import annotations

import asyncio
import json

import pytest

from clover_cli.agent.markup import UNFINISHED_NOTICE

from clover_cli.agent.events import BlockText, ToolCallProposed

from .helpers import call, drive, make_repo, new_agent, of, replay
from .test_run_cmd import clover

UNFINISHED = 'Let me see.\n<tool_call>{"nam'
STEPS = [UNFINISHED, "The answer is 42."]
GEMMA = 'Reading.\n<|tool_call>call:read_file{path:<|"|>calc.py<|"|>}<tool_call|>'


def test_the_agent_marks_calls_and_gives_back_a_call_that_did_not_run(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    agent = new_agent(repo, [GEMMA, UNFINISHED, "Done."], backend_opts={"chunk_chars": 3})
    events = drive(agent, "q")
    blocks = of(events, BlockText)
    assert of(events, ToolCallProposed)[0].name == "read_file"
    shown = "".join(b.text for b in blocks if b.kind in ("answer", "unrun_call"))
    assert shown == 'Reading.\nLet me see.\n<tool_call>{"namDone.'  # the DiffusionGemma call that ran: hidden
    assert [b.text for b in blocks if b.kind == "unrun_call"] == ['<tool_call>{"nam']


def test_run_shows_the_next_step_and_the_unfinished_call(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    p = clover("run", "q", "--model", replay(tmp_path, STEPS), "--root", str(repo))
    assert p.returncode == 0, p.stderr
    assert "Let me see." in p.stdout and '<tool_call>{"nam' in p.stdout and "The answer is 42." in p.stdout
    assert UNFINISHED_NOTICE in p.stderr and "Tool call not run: a call naming no tool" in p.stderr


def test_run_json_blocks_carry_visible_text_and_raw(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, ["Reading.\n" + call("read_file", path="calc.py"), "Done."])
    p = clover("run", "q", "--model", spec, "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    blocks = [json.loads(l) for l in p.stdout.splitlines() if json.loads(l)["type"] == "block"]
    assert "".join(b["text"] for b in blocks) == "Reading.\nDone."
    assert "".join(b["raw"] for b in blocks) == "Reading.\n" + call("read_file", path="calc.py") + "Done."
    p = clover("run", "q", "--model", replay(tmp_path, STEPS, "u.json"), "--root", str(repo), "--json")
    blocks = [json.loads(l) for l in p.stdout.splitlines() if json.loads(l)["type"] == "block"]
    released = [b for b in blocks if b.get("unfinished_call")]
    assert [b["text"] for b in released] == ['<tool_call>{"nam']
    assert "".join(b["text"] for b in blocks).endswith("The answer is 42.")


@pytest.mark.slow
def test_acp_shows_the_turn_after_an_unfinished_call(tmp_path):
    from .test_acp import _session
    repo = make_repo(tmp_path / "repo", git=False)
    client, result = asyncio.run(_session(repo, replay(tmp_path, STEPS), "yes", "q"))
    text = "".join(u.content.text for u in client.updates if u.session_update == "agent_message_chunk")
    thoughts = "".join(u.content.text for u in client.updates if u.session_update == "agent_thought_chunk")
    assert result.stop_reason == "end_turn"
    assert "Let me see." in text and '<tool_call>{"nam' in text and text.endswith("The answer is 42.")
    assert UNFINISHED_NOTICE in thoughts
