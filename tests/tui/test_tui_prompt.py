"""Prompt editing, history, completion, session commands and NO_COLOR in the running app."""
from __future__ import annotations

import pytest
from textual.color import Color

from clover_cli.tui.widgets.messages import NoticeLine, UserMessage

from .conftest import make_app, submit, type_text, wait_idle, wait_ready
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


@pytest.mark.slow
async def test_multiline_prompt_history_and_completion(repo):
    app = make_app(repo, ["one", "two"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        prompt = app.chat.query_one("#prompt")
        await type_text(pilot, "first line\nsecond line")
        await pilot.press("enter")
        await wait_idle(pilot)
        await submit(pilot, "again")
        await wait_idle(pilot)
        assert [u.text for u in app.chat.transcript.query(UserMessage)] == ["first line\nsecond line", "again"]
        await pilot.press("up")
        assert prompt.text == "again"
        await pilot.press("up", "up")  # cursor to the first line of the multi-line entry, then older
        assert prompt.text == "first line\nsecond line"
        await pilot.press("down", "down")
        assert prompt.text == "again"
        await pilot.press("down")
        assert prompt.text == ""
        await type_text(pilot, "/thr")
        await pilot.pause(0.05)
        assert "/threshold X" in screen_text(app)  # the completion hint
        await pilot.press("tab")
        assert prompt.text == "/threshold "
        await type_text(pilot, "0.7")
        await pilot.press("enter")
        await pilot.pause(0.05)
        assert app.chat.agent.backend.threshold == 0.7


async def test_clear_compact_and_sessions(repo):
    app = make_app(repo, ["first answer"])
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "a question")
        await wait_idle(pilot)
        await submit(pilot, "/compact")
        await wait_idle(pilot)
        assert notices(app)[-2:] == ["Compacting the conversation ...", "Compacted 3 messages into 3."]
        await submit(pilot, "/sessions")
        await pilot.pause(0.1)
        assert app.chat.agent.session_id + " *" in screen_text(app)
        assert "a question" in screen_text(app)
        await submit(pilot, "/clear")
        await wait_idle(pilot)
        assert notices(app) == ["Conversation cleared."]
        assert [m["role"] for m in app.chat.agent.messages] == ["system"]


async def test_no_color(repo, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(repo, ["Some **bold** text"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "hi")
        await wait_idle(pilot)
        assert app.no_color
        filters = app.get_line_filters()
        assert filters  # Textual's NoColor / Monochrome filter is installed
        colors = set()
        for strips in app.screen._compositor.render_full_update().strips:
            for strip in strips:
                for line_filter in filters:
                    strip = strip.apply_filter(line_filter, Color(0, 0, 0))
                for seg in strip:
                    for color in (seg.style.color, seg.style.bgcolor) if seg.style else ():
                        if color is not None and color.triplet is not None:
                            colors.add(tuple(color.triplet))
        assert colors and all(r == g == b for r, g, b in colors), colors
