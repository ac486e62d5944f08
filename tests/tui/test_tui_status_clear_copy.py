"""Smaller TUI behaviours: the status bar after /model and for unmeasured models, the
context meter after /clear, toasts that leave the prompt visible, /copy after an interrupt, and no
session file when nothing was sent."""
from __future__ import annotations

from clover_cli.tui.widgets.messages import NoticeLine

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready, write_replay


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


async def test_replay_models_show_no_tpf_or_speed_and_model_switch_is_announced(repo):
    app = make_app(repo, ["First answer."])
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "hi")
        await wait_idle(pilot)
        info = app.chat.status.info
        assert info.tpf is None and info.tokens_per_second is None
        assert "TPF" not in info.text() and "tok/s" not in info.text()
        app.chat.status.set(tpf=7.5, tokens_per_second=123.0)  # as an engine model would leave them
        script = write_replay(repo.parent, ["Other model."], "other.json")
        await submit(pilot, f"/model replay:{script}")
        await wait_ready(pilot)
        info = app.chat.status.info
        assert info.tpf is None and info.tokens_per_second is None, info
        assert notices(app)[-1] == "Switched to replay:other.json; the conversation goes on."
        assert not any(n.startswith("Resumed session") for n in notices(app))


async def test_context_meter_after_clear_shows_the_system_prompt(repo):
    app = make_app(repo, ["An answer."])
    async with app.run_test(size=(120, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "hi")
        await wait_idle(pilot)
        await submit(pilot, "/clear")
        await wait_for(pilot, lambda: "Conversation cleared." in notices(app), what="the clear")
        system = app.chat.agent.context_tokens()
        assert system > 0 and app.chat.status.info.context_used == system


async def test_an_error_toast_leaves_the_prompt_visible(repo):
    from textual.widgets._toast import Toast

    app = make_app(repo, ["An answer."])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_ready(pilot)
        app.chat.error("something went wrong " * 3)
        await pilot.pause(0.3)
        toasts = list(app.screen.query(Toast))
        assert toasts
        prompt = app.chat.prompt.region
        for toast in toasts:
            assert not toast.region.overlaps(prompt), (toast.region, prompt)


async def test_copy_after_an_interrupt_copies_the_partial_answer(repo):
    """The model was writing a call when Esc came: the partial answer is the call's text."""
    head = 'Writing it.\n<tool_call>{"name": "write_file", "arguments": {"path": "a.txt", "content": "'
    # all of the head in the first chunk (its answer text shows, the call text is held back until
    # the call is complete); 0.5 s a chunk: the rest would take minutes, so only Esc ends the turn
    app = make_app(repo, [head + "partial words " * 400], chunk_chars=len(head), delay=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk")
        await wait_for(pilot, lambda: "Writing it." in app.chat.transcript.last_answer(),
                       what="the first chunk")
        await pilot.press("escape")
        await wait_idle(pilot)
        assert "Interrupted." in notices(app)
        await submit(pilot, "/copy")
        await pilot.pause(0.1)
        assert notices(app)[-1].startswith("Copied the last answer"), notices(app)[-1]
        assert '"path": "a.txt"' in app.chat.transcript.last_answer()


async def test_no_session_file_when_nothing_was_sent(repo):
    app = make_app(repo, ["never"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        path = app.chat.agent.session_path
        await submit(pilot, "/approval auto-edit")
        await pilot.pause(0.1)
    assert not path.exists()
    assert not (path.parent.exists() and list(path.parent.glob("*.jsonl")))
