"""Smaller TUI behaviours (issue 49, point 15): a "new messages below" mark when something is
added while the transcript is scrolled up, the denoise view emptied when a turn ends, `/model`
with an `openai:` spec naming the spec, and the session reported saved only when its file exists."""
from __future__ import annotations

import pytest

from clover_cli.agent import events as ev
from clover_cli.tui.bridge import AgentEventMessage

from agent.openai_server import ScriptedServer, sse_text  # tests/agent/openai_server.py

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready
from .screen_text import screen_text
from .test_tui_status_clear_copy import notices

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits

NEW_BELOW = "new messages below"


@pytest.mark.slow
async def test_a_notice_added_while_scrolled_up_is_announced(repo):
    app = make_app(repo, ["\n\n".join(f"paragraph {i}" for i in range(40))])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk")
        await wait_idle(pilot)
        t = app.chat.transcript
        await wait_for(pilot, lambda: t.max_scroll_y > 0 and t.scroll_y == t.max_scroll_y, what="scrolled to the end")
        assert NEW_BELOW not in screen_text(app)
        await pilot.press("pageup")
        await pilot.pause(0.2)
        await submit(pilot, "/approval auto-edit")  # a notice, below the visible part
        await wait_for(pilot, lambda: NEW_BELOW in screen_text(app), what="the new-messages mark")
        assert "Approval mode: auto-edit." not in screen_text(app)  # it is off-screen
        while t.scroll_y < t.max_scroll_y:
            await pilot.press("pagedown")
            await pilot.pause(0.1)
        await wait_for(pilot, lambda: NEW_BELOW not in screen_text(app), what="the mark to go")
        assert "Approval mode: auto-edit." in screen_text(app)


async def test_the_denoise_view_is_emptied_when_the_turn_ends(repo):
    edit = '<tool_call>{"name": "edit_file", "arguments": {"path": "greet.py", "old": "hello", "new": "hi"}}</tool_call>'
    app = make_app(repo, [edit, "ok"])
    async with app.run_test(size=(80, 34)) as pilot:
        await wait_ready(pilot)
        chat = app.chat
        await pilot.press("ctrl+t")
        await submit(pilot, "talk")
        await wait_for(pilot, lambda: chat.approval is not None, what="the turn to wait on its approval")
        chat.post_message(AgentEventMessage(ev.DenoiseProgress(3, 2, ("def", " greet", "", ":"),
                                                               (False, False, True, False))))
        await wait_for(pilot, lambda: "block 3 · step 2" in screen_text(app), what="the block drawn")
        assert "def greet░:" in screen_text(app)
        await pilot.press("n", "enter")
        await wait_idle(pilot)
        text = screen_text(app)
        assert "def greet" not in text and "block 3" not in text, text
        assert "waiting for the next block" in text


async def test_switching_to_a_remote_model_names_the_spec(repo):
    with ScriptedServer([sse_text("Remote answer.")]) as server:
        spec = f"openai:{server.base_url}#stub"
        app = make_app(repo, ["Local answer."])
        async with app.run_test(size=(120, 24)) as pilot:
            await wait_ready(pilot)
            await submit(pilot, "hi")
            await wait_idle(pilot)
            await submit(pilot, f"/model {spec}")
            await wait_for(pilot, lambda: any(n.startswith("Switched to") for n in notices(app)), what="the switch")
            await wait_ready(pilot)
            assert f"Switched to {spec}; the conversation goes on." in notices(app), notices(app)


async def test_the_session_is_reported_saved_only_once_its_file_exists(repo):
    app = make_app(repo, ["An answer."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "/quit")
    assert app.return_value["saved"] is False
    app = make_app(repo, ["An answer."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "hi")
        await wait_idle(pilot)
        await submit(pilot, "/quit")
    assert app.return_value["saved"] is True
