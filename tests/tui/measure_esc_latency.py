"""Measure how fast Esc ends a turn in the TUI (a script, not a test).

    .venv/bin/python tests/tui/measure_esc_latency.py [--rounds 5]

Drives the real app through Textual's pilot, on the replay backend, in a temporary git
repository: (a) a long answer streamed slowly (4 characters per 30 ms) and (b) a shell command
printing a line every 50 ms; each round presses Esc mid-turn and records the time from the key
being handled to the turn's end (ChatScreen.interrupted_at / stopped_at). Prints min, median and
max per case in ms. The tests only check that Esc ends the turn (tests/tui/
test_tui_focus_escape_approval.py); the figure lives here and in docs/tui.md, "Interrupt".
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.tui.conftest import make_app, submit, wait_for, wait_ready  # noqa: E402

SHELL = "for i in $(seq 1 100); do echo line$i; sleep 0.05; done"


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


async def measure(repo: Path, case: str, rounds: int) -> list[float]:
    if case == "stream":
        app = make_app(repo, ["word " * 400] * rounds, chunk_chars=4, delay=0.03)
    else:
        app = make_app(repo, [call("run_shell", command=SHELL)] * rounds, approval="yolo")
    took = []
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        for _ in range(rounds):
            await submit(pilot, "go")
            await wait_for(pilot, lambda: app.chat.busy, what="the turn to start")
            await pilot.pause(0.5)  # streaming, or the command printing
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.chat.busy, what="the turn to stop")
            took.append(app.chat.stopped_at - app.chat.interrupted_at)
            await pilot.pause(0.2)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "xdg")
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        (repo / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
        for case in ("stream", "shell"):
            ms = [t * 1000 for t in asyncio.run(measure(repo, case, args.rounds))]
            print(f"Esc -> turn end, {case:6}: min {min(ms):.0f} ms, median {statistics.median(ms):.0f} ms, "
                  f"max {max(ms):.0f} ms over {len(ms)} rounds")


if __name__ == "__main__":
    main()
