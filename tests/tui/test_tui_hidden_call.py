"""The TUI shows the rest of a turn after an unfinished tool call, and the call's text with a
notice (docs/agent.md, "Visible text")."""
from __future__ import annotations

from clover_cli.agent.markup import UNFINISHED_NOTICE
from clover_cli.tui.widgets.messages import AssistantMessage, NoticeLine

from .conftest import make_app, submit, wait_idle, wait_ready


async def test_an_unfinished_call_does_not_hide_the_rest_of_the_turn(repo):
    app = make_app(repo, ['Let me see.\n<tool_call>{"nam', "The answer is 42."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "question")
        await wait_idle(pilot)
        t = app.chat.transcript
        answers = [a.text for a in t.query(AssistantMessage)]
        assert answers[-1] == "The answer is 42."
        assert any('<tool_call>{"nam' in a and "Let me see." in a for a in answers), answers
        assert UNFINISHED_NOTICE in [n.message for n in t.query(NoticeLine)]
