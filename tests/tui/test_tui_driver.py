"""The TUI on the one turn driver (clover_cli/agent/driver.py) and the typed agent interface
(clover_cli/agent/interface.py): turns and /compact run on a TurnDriver worker, Esc cancels through
it, and /sessions ID reopens a session on the model already loaded."""
from __future__ import annotations

import threading

import pytest

from clover_cli.agent.driver import TurnDriver
from clover_cli.tui.widgets.messages import AssistantMessage, NoticeLine

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


@pytest.mark.slow
async def test_a_turn_runs_on_the_turn_driver_and_esc_cancels_through_it(repo):
    # 0.5 s a chunk: the 300 words would stream for 3 minutes, so only the cancel can end the turn
    app = make_app(repo, ["word " * 300, "Second answer."], chunk_chars=4, delay=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk")
        await wait_for(pilot, lambda: any(a.text for a in app.chat.transcript.query(AssistantMessage)),
                       what="streaming to start")
        driver = app.chat.driver
        assert isinstance(driver, TurnDriver) and driver.running
        assert "clover-turn" in [t.name for t in threading.enumerate()]
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.chat.busy, what="the turn to stop")  # a hang guard
        # how fast Esc stops a turn is measured by tests/tui/measure_esc_latency.py, not by a test
        assert driver.cancelled and not driver.running and driver.finished.reason == "cancelled"
        (message,) = app.chat.transcript.query(AssistantMessage)
        assert 0 < len(message.text) < len("word " * 300)  # cut short, not streamed to the end
        await submit(pilot, "again")
        await wait_idle(pilot)
        assert app.chat.driver is not driver and app.chat.driver.finished.reason == "done"
        assert "Second answer." in screen_text(app)


@pytest.mark.slow
async def test_esc_during_compact_keeps_the_conversation(repo):
    # 0.5 s a chunk: the summary would stream for 2 minutes, so only the cancel can end it
    app = make_app(repo, ["first answer", "A long summary. " * 60], chunk_chars=4, delay=0.5)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "a question")
        await wait_idle(pilot)
        before = app.chat.agent.messages
        await submit(pilot, "/compact")
        await wait_for(pilot, lambda: "Compacting the conversation ..." in notices(app), what="compaction")
        assert app.chat.busy == "compacting" and app.chat.driver.running
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.chat.busy, what="the compaction to stop")  # a hang guard
        assert notices(app)[-1] == "Compaction cancelled; the conversation is unchanged."
        assert app.chat.agent.messages == before


async def test_sessions_id_reopens_on_the_loaded_model(repo):
    app = make_app(repo, ["First answer.", "Second answer."])
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "a question")
        await wait_idle(pilot)
        first = app.chat.agent
        await submit(pilot, f"/sessions {first.session_id}")
        await wait_for(pilot, lambda: app.chat.agent is not first and not app.chat.busy, what="the reopen")
        assert app.chat.agent.backend is first.backend  # not loaded again (tests may look inside)
        assert f"Resumed session {first.session_id}" in notices(app)
        assert "a question" in screen_text(app)
        await submit(pilot, "and now?")
        await wait_idle(pilot)
        assert "Second answer." in screen_text(app)
