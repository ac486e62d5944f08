"""Smoke test: the real `clover` in a real terminal (tmux, 80x24) with an in-process model.

Uses the bundled tiny model once its weights exist (`--model tiny`), until then a tiny random
checkpoint built here. Needs tmux (`apt-get install -y tmux`).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from clover_cli.engine.loader import bundled_tiny_dir

from clover_cli.agent.session import sessions_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

BUNDLED = bundled_tiny_dir()
MODEL = "tiny" if any(BUNDLED.glob("*.safetensors")) else "random"


SOCKET = f"clover-test-{uuid.uuid4().hex[:8]}"  # a private tmux server, isolated from others


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=True, capture_output=True, text=True).stdout


def wait_screen(session: str, pattern: str, timeout: float) -> str:
    """Poll the pane until `pattern` (a regex) shows; return the screen."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if re.search(pattern, screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} did not appear in {timeout:.0f}s; screen:\n{screen}")


def model_spec(tmp_path: Path) -> str:
    if MODEL == "tiny":
        return "tiny"
    from tiny_checkpoints import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path / "ckpt", "clover", block_size=32, logit_scale=12.0)
    cfg = json.loads((path / "config.json").read_text())
    cfg["max_position_embeddings"] = 16384  # the byte-level test tokenizer makes the prompt long
    (path / "config.json").write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize("model", [MODEL])
def test_clover_in_tmux_answers_a_prompt(tmp_path, repo, model):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    spec = model_spec(tmp_path)
    clover = Path(sys.executable).parent / "clover"
    session = f"clover-test-{uuid.uuid4().hex[:8]}"
    env = f"XDG_CONFIG_HOME={tmp_path / 'xdg'} CLOVER_TUI_PERF={tmp_path / 'perf.jsonl'}"
    command = f"cd {repo} && env {env} {clover} --model {spec} --root {repo}; echo EXIT=$?; sleep 60"
    tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", command)
    try:
        wait_screen(session, r"Type a request", 180)
        tmux("send-keys", "-t", session, "list the files", "Enter")
        screen = wait_screen(session, r"TPF \d", 240)  # the status bar shows speed after the turn
        lines = screen.splitlines()
        asked = next((i for i, line in enumerate(lines) if "list the files" in line), -1)  # -1: scrolled off by a long answer
        box = next(i for i, line in enumerate(lines) if line.startswith("▊▔"))
        answer = [line for line in lines[asked + 1:box] if line.strip()]
        assert answer, f"no answer on screen:\n{screen}"
        if model == "tiny":
            assert any("⚙" in line for line in answer) or len(" ".join(answer)) > 10, screen
        assert re.search(r"ctx [\d.]+k?/[\d.]+k", lines[-1]) and "⎇ main" in lines[-1]
        tmux("send-keys", "-t", session, "C-c")
        wait_screen(session, r"Press Ctrl\+C again to quit\.", 30)  # the 3 s quit window is open
        tmux("send-keys", "-t", session, "C-c")
        screen = wait_screen(session, r"EXIT=\d", 30)
        assert "EXIT=0" in screen and "Session " in screen and "saved to" in screen, screen
        sessions = list(sessions_dir(repo).glob("*.jsonl"))
        assert len(sessions) == 1 and "list the files" in sessions[0].read_text()
        perf = [json.loads(line) for line in (tmp_path / "perf.jsonl").read_text().splitlines()]
        assert perf and perf[0]["wall_s"] > 0
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
