"""A Ctrl+C that lands while `TurnDriver.run` is still inside `start` (the worker thread already
running) cancels the turn before it is re-raised (clover_cli/agent/driver.py, `run`)."""
from __future__ import annotations

import threading

import pytest

from clover_cli.agent.driver import TurnDriver

from .test_driver import _slow_agent

pytestmark = pytest.mark.timeout(120)


def test_ctrl_c_inside_start_cancels_the_turn_it_started(tmp_path, monkeypatch):
    agent = _slow_agent(tmp_path)  # a 300 s model step: only a cancel (or the grace) ends it
    original = threading.Thread.start

    def start_then_ctrl_c(thread):  # the worker is running, `start` has not returned yet
        original(thread)
        if thread.name == "clover-turn":
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    driver = TurnDriver(agent, grace=0.5)
    with pytest.raises(KeyboardInterrupt):
        driver.run("wait")
    monkeypatch.undo()
    assert driver.cancelled  # before the fix: the turn ran on, uncancelled
    assert driver.wait(60) is driver.finished  # a hang guard: the cancel ends it within the grace
    assert driver.finished.reason == "cancelled" and not driver.running
