"""The status bar's prefix-reuse figures (docs/tui.md, "Status bar"): how much of the last prompt
came from the engine's cache and the time to its first committed block, for the in-process
engine only; /clear drops them with the cache."""
from __future__ import annotations

import pytest

from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.widgets.status_bar import StatusInfo, prefix_figures

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits

ENGINE_CALL = {"prompt_tokens": 11100, "generated_tokens": 40, "reused_tokens": 10600,
               "prefilled_tokens": 500, "first_block_seconds": 0.42}


def test_status_text_for_given_stats():
    stats = {"model_calls": [{**ENGINE_CALL, "reused_tokens": 0}, ENGINE_CALL]}
    assert prefix_figures(stats) == {"cached": 10600, "first_block": 0.42}  # the last call's
    info = StatusInfo(model="tiny", block_size=32, threshold=0.95, context_used=11100, context_window=32768,
                      approval="auto-edit", **prefix_figures(stats))
    assert info.text() == "tiny · block 32 · thr 0.95 · ctx 11.1k/32.8k · 10.6k cached · 1st block 0.42s · auto-edit"
    narrow = info.text(width=60)  # the time goes first, then the reuse, before the context meter
    assert "1st block" not in narrow and "ctx 11.1k/32.8k" in narrow
    assert "cached" not in info.text(width=40) and "ctx" in info.text(width=40)
    # backends that do not report reuse (replay, remote) show nothing; 0 s means "not measured"
    assert prefix_figures({"model_calls": [{"prompt_tokens": 5, "generated_tokens": 1}]}) == {}
    assert prefix_figures({}) == {}
    cold = {**ENGINE_CALL, "reused_tokens": 0, "first_block_seconds": 0.0}
    assert prefix_figures({"model_calls": [cold]}) == {"cached": 0}
    assert StatusInfo(model="m", cached=0).text() == "m · 0 cached · ask"


async def test_engine_turn_shows_reuse_and_clear_drops_it(repo):
    app = CloverApp(SessionOptions(model="tiny", root=repo, approval="auto-edit"))
    async with app.run_test(size=(140, 24)) as pilot:
        await wait_ready(pilot)
        status = app.chat.status
        assert status.info.cached is None and "cached" not in status.info.text()
        assert status.info.placement == "cpu · float32" and "tiny · cpu · float32 · block 32" in status.info.text()
        await submit(pilot, "Where is the function greet defined?")
        await wait_for(pilot, lambda: status.info.cached is not None, what="the turn's figures")
        await wait_idle(pilot)
        # a tool call, then the answer: the answer's call reused the first call's prompt
        assert status.info.cached > 0 and status.info.first_block > 0
        assert f" cached · 1st block {status.info.first_block:.2f}s · " in status.info.text()
        await submit(pilot, "/clear")
        await wait_idle(pilot)
        assert status.info.cached is None and status.info.first_block is None
        assert "cached" not in status.info.text()


async def test_replay_turn_shows_no_reuse(repo):
    app = make_app(repo, ["Hello."])
    async with app.run_test(size=(140, 24)) as pilot:
        await wait_ready(pilot)
        assert app.chat.status.info.placement == ""  # a scripted model runs nowhere in particular
        await submit(pilot, "hi")
        await wait_idle(pilot)
        assert "cached" not in app.chat.status.info.text() and "1st block" not in app.chat.status.info.text()
