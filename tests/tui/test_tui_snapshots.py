"""Snapshot tests of the main screen states at 80x24 (pytest-textual-snapshot).

Update after an intended visual change with: pytest tests/tui/test_tui_snapshots.py --snapshot-update
Speed and context figures come from the clock and the system prompt, so they are pinned before
the screenshot to keep the snapshots deterministic.
"""
from __future__ import annotations

import json

import pytest

from clover_cli.agent import events as ev
from clover_cli.tui.bridge import AgentEventMessage

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready  # noqa: F401

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits

EDIT = "<tool_call>" + json.dumps({"name": "edit_file", "arguments": {
    "path": "greet.py", "old": '"hello "', "new": '"hi "'}}) + "</tool_call>"
SCRIPT = ["<think>The user wants hi.</think>I'll change the greeting.\n" + EDIT,
          "Done. `greet` now says:\n\n```python\nreturn \"hi \" + name\n```\n\n- tests still pass\n- nothing else changed"]


async def _ready(pilot) -> None:
    """Model loaded; the prompt cursor stops blinking (a blink phase would differ per run)."""
    await wait_ready(pilot)
    pilot.app.chat.query_one("#prompt").cursor_blink = False


async def _steady(pilot) -> None:
    chat = pilot.app.chat
    await wait_for(pilot, lambda: not chat.transcript.dirty and not chat.denoise.pending, what="a drawn frame")
    chat.status.set(tpf=2.5, tokens_per_second=50.0, context_used=1234)
    await pilot.pause(0.2)


def test_snapshot_after_a_turn_with_an_edit(snap_compare, repo):
    app = make_app(repo, SCRIPT, approval="auto-edit")

    async def run_before(pilot):
        await _ready(pilot)
        await submit(pilot, "make greet say hi")
        await wait_idle(pilot)
        await _steady(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_approval_dialog(snap_compare, repo):
    app = make_app(repo, SCRIPT)

    async def run_before(pilot):
        await _ready(pilot)
        await submit(pilot, "make greet say hi")
        await wait_for(pilot, lambda: pilot.app.chat.approval is not None, what="the dialog")
        await _steady(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_help(snap_compare, repo):
    app = make_app(repo, [])

    async def run_before(pilot):
        await _ready(pilot)
        await submit(pilot, "/help")
        await _steady(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_snapshot_denoise_view_and_completion(snap_compare, repo):
    app = make_app(repo, [])

    async def run_before(pilot):
        await _ready(pilot)
        chat = pilot.app.chat
        await pilot.press("ctrl+t")
        chat.post_message(AgentEventMessage(ev.BlockText("Here is the function:\n\n", 0)))
        pieces = ("def", " greet", "(", "name", "):", "\n   ", " return", "", "", "", " +", " name")
        masked = (False,) * 7 + (True, True, True) + (False, False)
        chat.post_message(AgentEventMessage(ev.DenoiseProgress(1, 3, pieces, masked)))
        await pilot.press("slash", "c")
        await _steady(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
