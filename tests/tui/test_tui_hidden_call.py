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


async def test_a_resumed_session_hides_calls_that_ran_and_shows_one_that_did_not(repo):
    from clover_cli.tui.app import CloverApp
    from clover_cli.tui.bridge import SessionOptions

    from .conftest import write_replay

    first = make_app(repo, ['Reading.\n<tool_call>{"name": "read_file", "arguments": {"path": "greet.py"}}</tool_call>',
                            'Done. <tool_call>{"nam', "Final."])
    async with first.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "question")
        await wait_idle(pilot)
    script = write_replay(repo.parent, [], "empty.json")
    app = CloverApp(SessionOptions(model=f"replay:{script}", root=repo, resume="last"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        answers = [a.text for a in app.chat.transcript.query(AssistantMessage)]
        assert answers[0].strip() == "Reading." and "read_file" not in answers[0]
        assert any('<tool_call>{"nam' in a for a in answers) and answers[-1].strip() == "Final."


async def test_diffusiongemma_calls_do_not_reach_the_screen(repo):
    """DiffusionGemma's `<|tool_call>...<tool_call|>`, streamed in 3-character chunks that cut its
    tags, shows as a tool panel and never as text."""
    from clover_cli.tui.widgets.tool_panel import ToolPanel

    call = '<|tool_call>call:read_file{path:<|"|>greet.py<|"|>}<tool_call|>'
    app = make_app(repo, [f"Reading.\n{call}\nok", "Done."], approval="auto-edit", chunk_chars=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "question")
        await wait_idle(pilot)
        t = app.chat.transcript
        answers = [a.text for a in t.query(AssistantMessage)]
        assert [a.strip() for a in answers] == ["Reading.\n\nok", "Done."]
        assert [p.tool_name for p in t.query(ToolPanel)] == ["read_file"]
        assert not [n for n in t.query(NoticeLine) if n.message == UNFINISHED_NOTICE]
        assert "tool_call" not in app.export_screenshot()
