"""On the bundled `tiny`, the TUI says once, in one line, that it is a demo and how to pick a
real model (`clover models`); on any other model it says nothing of the kind."""
from __future__ import annotations

from clover_cli.agent.demo import DEMO_NOTICE
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.widgets.messages import NoticeLine

from .conftest import make_app, wait_ready


def _notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


async def test_tiny_shows_the_demo_notice_once(repo):
    app = CloverApp(SessionOptions(model="tiny", root=repo, approval="ask"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.pause(0.1)
        assert _notices(app).count(DEMO_NOTICE) == 1
        assert "clover models" in DEMO_NOTICE and "\n" not in DEMO_NOTICE


async def test_another_model_shows_no_demo_notice(repo):
    app = make_app(repo, ["Hello."])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.pause(0.1)
        assert DEMO_NOTICE not in _notices(app)
