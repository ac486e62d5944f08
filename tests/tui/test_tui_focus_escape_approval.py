"""Pilot tests: focus never lost, Esc interrupts fast, live tool output, plural text."""
from __future__ import annotations

import json
import re

import pytest
from textual.widgets._collapsible import CollapsibleTitle

from clover_cli.tui.widgets.messages import AssistantMessage, NoticeLine
from clover_cli.tui.widgets.prompt_input import PLACEHOLDER
from clover_cli.tui.widgets.tool_panel import LIVE_LINES, ToolPanel

from .conftest import make_app, submit, type_text, wait_for, wait_idle, wait_ready
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


async def stop_with_escape(pilot) -> None:
    """Press Esc during a turn and check that it ends the turn. The turns given here cannot end by
    themselves within the wait (a hang guard); how fast Esc is (~tens of ms) is measured by
    tests/tui/measure_esc_latency.py (docs/tui.md, "Interrupt"), not by a test."""
    chat = pilot.app.chat
    driver = chat.driver
    await pilot.press("escape")
    await wait_for(pilot, lambda: not chat.busy, what="the turn to stop")
    assert chat.interrupted_at is not None and chat.stopped_at is not None
    assert driver.cancelled and driver.finished.reason == "cancelled"


@pytest.mark.slow
async def test_typing_after_clicking_a_panel_and_after_tab_lands_in_the_prompt(repo):
    app = make_app(repo, ["Reading.\n" + call("read_file", path="greet.py"), "It greets."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "read greet")
        await wait_idle(pilot)
        prompt = app.chat.prompt
        (panel,) = app.chat.transcript.query(ToolPanel)
        title = panel.query_one(CollapsibleTitle)
        assert panel._fold.collapsed
        await pilot.click(title)
        await pilot.pause(0.1)
        assert not panel._fold.collapsed  # the click did its job ...
        assert app.focused is prompt  # ... and the keys still go to the prompt
        await type_text(pilot, "after click")
        assert prompt.text == "after click"
        await pilot.press("tab")
        await pilot.pause(0.05)
        assert app.focused is prompt
        await type_text(pilot, " tab")
        assert prompt.text == "after click tab"
        await pilot.click("#transcript")  # a click on the transcript itself
        await pilot.pause(0.1)
        assert app.focused is prompt


async def test_shift_tab_moves_focus_deliberately_and_typing_returns_it(repo):
    app = make_app(repo, ["Reading.\n" + call("read_file", path="greet.py"), "ok"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "read greet")
        await wait_idle(pilot)
        prompt = app.chat.prompt
        await pilot.press("shift+tab")
        await pilot.pause(0.1)
        assert app.focused is not prompt and app.focused is not None  # it stays where it was sent
        await pilot.press("x", "y")
        await pilot.pause(0.05)
        assert app.focused is prompt and prompt.text == "xy"


async def test_placeholder_and_focus_ring(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_ready(pilot)
        assert PLACEHOLDER in screen_text(app)
        prompt = app.chat.prompt
        focused_colour = prompt.styles.border_top[1]
        await pilot.press("shift+tab")
        await pilot.pause(0.1)
        assert app.focused is not prompt
        assert prompt.styles.border_top[1] != focused_colour  # the ring moved away


async def test_escape_ends_a_streaming_turn(repo):
    long_answer = "word " * 400  # 1,600 chars at 4 chars per 0.5 s: streams for 200 s unless stopped
    app = make_app(repo, [long_answer, "second"], chunk_chars=4, delay=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk a lot")
        await wait_for(pilot, lambda: app.chat.busy and any(
            a.text for a in app.chat.transcript.query(AssistantMessage)), what="streaming to start")
        await stop_with_escape(pilot)
        (message,) = app.chat.transcript.query(AssistantMessage)
        assert 0 < len(message.text) < len(long_answer)  # cut short, not streamed to the end
        assert "Interrupted." in notices(app)
        hint = app.chat.query_one("#completions")
        assert not hint.display or "Interrupting" not in str(hint.render())  # no lingering toast
        assert not list(app._notifications)  # no toast over the prompt


async def test_escape_stops_a_slow_tool_and_its_output_streams_live(repo):
    script = "for i in $(seq 1 2000); do echo line$i; sleep 0.05; done"  # 100 s unless stopped
    app = make_app(repo, [call("run_shell", command=script), "never"], approval="yolo")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "count slowly")
        await wait_for(pilot, lambda: "line3" in screen_text(app), what="live output on screen")
        (panel,) = app.chat.transcript.query(ToolPanel)
        assert panel.status == "running" or panel.status == "proposed"
        assert panel._fold.collapsed or not panel._fold.display  # the live lines show without unfolding
        await wait_for(pilot, lambda: "line9" in screen_text(app), what="more live output")
        live = re.findall(r"\bline(\d+)\b", screen_text(app))
        assert 0 < len(live) <= LIVE_LINES and "1" not in live, live  # the last lines only
        await stop_with_escape(pilot)
        assert panel.status == "failed" and "Interrupted." in notices(app)
        assert app.chat.agent.backend.calls == 1  # the model was not asked again after the stop


async def test_tool_output_counts_lines_in_the_singular(repo):
    app = make_app(repo, [call("run_shell", command="true"), "done"], approval="yolo")  # "[exit code 0]"
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "echo")
        await wait_idle(pilot)
        (panel,) = app.chat.transcript.query(ToolPanel)
        assert "(1 line)" in str(panel._fold.title), panel._fold.title


async def test_approval_is_docked_with_keyed_buttons_and_the_transcript_visible(repo):
    edit = call("edit_file", path="greet.py", old='"hello "', new='"hi "')
    app = make_app(repo, ["Changing the greeting now.\n" + edit, "ok"])
    async with app.run_test(size=(80, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the dialog")
        await wait_for(pilot, lambda: "Changing the greeting now." in screen_text(app), what="the answer drawn")
        text = screen_text(app)
        assert "[y] Yes" in text and "[n] No" in text and "[a] Always" in text
        assert "say hi" in text and "Changing the greeting now." in text  # transcript above
        dialog = app.chat.query_one("#approval-dialog")
        assert dialog.region.bottom == 29  # at the bottom, above the status bar only
        await pilot.press("n", "enter")
        await wait_idle(pilot)


async def test_a_stray_y_or_enter_right_after_the_dialog_opens_approves_nothing(repo, monkeypatch):
    """A user still typing when the dialog appears must not approve a call with `y`, `a` or
    Enter (the Yes button has focus): inside the guard window those are ignored, `y` works after."""
    from clover_cli.tui.screens.approval import ApprovalDialog

    # a window no loaded machine can overrun between the dialog opening and the keys, then
    # closed by moving the dialog's opening time back (the guard reads it at each key)
    monkeypatch.setattr(ApprovalDialog, "GUARD_SECONDS", 30.0)
    edit = call("edit_file", path="greet.py", old='"hello "', new='"hi "')
    before = (repo / "greet.py").read_text()
    app = make_app(repo, ["Changing it.\n" + edit, "ok"])
    async with app.run_test(size=(80, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the dialog")
        await pilot.press("y", "a", "enter")
        await pilot.pause(0.05)
        assert app.chat.approval is not None and (repo / "greet.py").read_text() == before
        dialog = app.chat.approval[1]
        dialog.opened_at -= 31.0  # the guard window has passed
        await pilot.press("y")
        await wait_idle(pilot)
        assert (repo / "greet.py").read_text() != before


async def test_page_keys_scroll_the_transcript_from_the_prompt(repo):
    app = make_app(repo, ["\n\n".join(f"paragraph {i}" for i in range(40))])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk")
        await wait_idle(pilot)
        t = app.chat.transcript
        await wait_for(pilot, lambda: t.max_scroll_y > 0 and t.scroll_y == t.max_scroll_y, what="scrolled to the end")
        bottom = t.scroll_y
        await pilot.press("pageup")
        await pilot.pause(0.2)
        assert t.scroll_y < bottom and app.focused is app.chat.prompt
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert t.scroll_y == bottom
