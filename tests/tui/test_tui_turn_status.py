"""The status bar while a turn runs (docs/tui.md, "Screen"): the context meter counts the prompt
as soon as it is sent, and the status names what runs: "awaiting approval" while the dialog is
open, "running CMD" while a tool runs, "generating" only while the model generates."""
from __future__ import annotations

import json

import pytest

from clover_cli.agent import events as ev

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def record_status(chat) -> list[tuple[type, str, int | None]]:
    """(event type, status text, context meter) after each event the screen handles."""
    seen: list[tuple[type, str, int | None]] = []
    handle = chat.handle_event

    def recording(event):
        handle(event)
        seen.append((type(event), chat.status.info.busy, chat.status.info.context_used))

    chat.handle_event = recording
    return seen


def statuses(seen, kind) -> set[str]:
    return {busy for k, busy, _ in seen if k is kind}


async def test_status_names_the_approval_the_command_and_the_generation(repo):
    script = "seq 1 3"
    app = make_app(repo, ["Let me look.\n" + call("run_shell", command=script), "All three lines."],
                   chunk_chars=4)
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_ready(pilot)
        seen = record_status(app.chat)
        await submit(pilot, "count")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        assert app.chat.status.info.busy == "awaiting approval"
        assert "awaiting approval" in app.chat.status.info.text()
        await pilot.press("y")
        await wait_idle(pilot)
        assert statuses(seen, ev.BlockText) == {"generating"}
        assert statuses(seen, ev.ApprovalRequested) == {"awaiting approval"}
        assert statuses(seen, ev.ToolOutput) == {f"running {script}"}
        assert app.chat.status.info.busy == ""  # idle again


async def test_a_tool_that_needs_no_approval_shows_running_at_once(repo):
    app = make_app(repo, [call("run_shell", command="echo hi"), "done"], approval="yolo")
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_ready(pilot)
        seen = record_status(app.chat)
        await submit(pilot, "say hi")
        await wait_idle(pilot)
        assert statuses(seen, ev.ToolCallProposed) == {"running echo hi"}
        assert statuses(seen, ev.ToolOutput) <= {"running echo hi"}
        assert statuses(seen, ev.BlockText) == {"generating"}


async def test_the_context_meter_counts_the_prompt_when_it_is_sent(repo):
    app = make_app(repo, ["Short answer."])
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_ready(pilot)
        before = app.chat.status.info.context_used
        prompt = "please explain every line of greet.py in detail " * 40
        expected = app.chat.agent.context_tokens(pending=prompt)
        assert expected > before + 100
        seen = record_status(app.chat)
        await submit(pilot, prompt)
        await wait_idle(pilot)
        (started,) = [used for k, _, used in seen if k is ev.TurnStarted]
        assert started == expected  # before the model's first block, not after the turn
