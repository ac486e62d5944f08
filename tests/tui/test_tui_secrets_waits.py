"""The TUI against a scripted OpenAI-compatible server (tests/agent/openai_server.py) through
Textual's Pilot: a key the server echoes over streamed chunks, or quotes in an error, is never
drawn (clover_cli/agent/shown.py scrubs the events; docs/security.md, "Redaction"), and a server
that sends nothing is said in the transcript as a wait, with --request-timeout's limit."""
from __future__ import annotations

import sys
import threading

import pytest

from clover_cli.agent import redact
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.widgets.messages import AssistantMessage, NoticeLine

from tests.agent.openai_server import ScriptedServer, sse_text
from .conftest import submit, wait_for, wait_idle, wait_ready
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits
KEY = "sk-live-4Tg8Wc2Pn6Rk1Yx5"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    """The key in the environment; the registry and the wrapped std streams restored after."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(redact, "_values", [])
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)


def _app(repo, server, **backend_options) -> CloverApp:
    return CloverApp(SessionOptions(model=f"openai:{server.base_url}#m", root=repo, approval="ask",
                                    backend_options=backend_options))


def _shown(app) -> str:
    t = app.chat.transcript
    return "\n".join([a.text for a in t.query(AssistantMessage)] + [n.message for n in t.query(NoticeLine)]
                     + [screen_text(app)])


async def test_a_key_echoed_over_chunks_or_quoted_in_an_error_is_never_drawn(repo):
    error = {"status": 400, "body": {"error": {"message": f"invalid api key: Bearer {KEY}"}}}
    with ScriptedServer([sse_text("Your key is s", KEY[1:9], KEY[9:], " and that is all."), error]) as server:
        app = _app(repo, server)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_ready(pilot)
            await submit(pilot, "say hi")
            await wait_idle(pilot)
            answers = [a.text for a in app.chat.transcript.query(AssistantMessage)]
            assert any("Your key is [REDACTED] and that is all." in a for a in answers), answers
            await submit(pilot, "again")
            await wait_idle(pilot)
            shown = _shown(app)
    assert server.requests[0]["headers"].get("Authorization") == f"Bearer {KEY}"
    assert KEY not in shown and KEY[1:9] not in shown, shown
    assert "invalid api key: Bearer [REDACTED]" in shown, shown


async def test_a_silent_server_is_said_as_a_wait(repo, monkeypatch):
    """The server holds its answer until the transcript shows the wait (the notice releases it:
    no clock in the test)."""
    monkeypatch.setenv("CLOVER_WAIT_NOTICE_S", "0.2")
    released = threading.Event()
    with ScriptedServer([sse_text("Here at last.")], check=lambda body: released.wait(60) and None) as server:
        app = _app(repo, server, request_timeout=77)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_ready(pilot)
            await submit(pilot, "say hi")

            def waited() -> bool:
                return any("waiting for" in n.message for n in app.chat.transcript.query(NoticeLine))
            await wait_for(pilot, waited, what="the wait notice")
            released.set()
            await wait_idle(pilot)
            notes = [n.message for n in app.chat.transcript.query(NoticeLine)]
            answers = [a.text for a in app.chat.transcript.query(AssistantMessage)]
    wait = next(n for n in notes if "waiting for" in n)
    assert server.base_url in wait and "77 s (--request-timeout)" in wait, notes
    assert any("Here at last." in a for a in answers), answers
