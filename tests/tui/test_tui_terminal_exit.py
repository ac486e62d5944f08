"""The real `clover` in tmux (80x24), with a replay model: quitting while the model loads ends
the process at once; the warnings about ignored repository settings show in the chat log (not
behind the TUI on stderr); quitting after sending nothing claims no saved session.

Needs tmux (`apt-get install -y tmux`); each case takes a few seconds (Textual's start-up).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from clover_cli.trust import TrustStore

from .conftest import write_replay

pytestmark = [pytest.mark.timeout(240),  # a hang guard above the 60 s waits
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

GENEROUS = 60.0  # seconds: a bound no loaded machine reaches; the waits end on what the screen shows


class Terminal:
    """One `clover` run in a private tmux server; the pane prints EXIT=<code> when it ends."""

    def __init__(self, tmp_path: Path, repo: Path, *args: str) -> None:
        self.socket = f"clover-test-{uuid.uuid4().hex[:8]}"
        clover = Path(sys.executable).parent / "clover"
        env = f"XDG_CONFIG_HOME={tmp_path / 'xdg'} XDG_STATE_HOME={tmp_path / 'state'}"
        command = (f"cd {repo} && env {env} {clover} --root {repo} {' '.join(args)}; "
                   "echo EXIT=$?; sleep 600")
        self.tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")  # -J: wrapped lines joined

    def wait(self, pattern: str) -> str:
        """Poll the pane until `pattern` (a regex) shows; return the screen."""
        deadline = time.monotonic() + GENEROUS
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} did not appear; screen:\n{screen}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.mark.parametrize("keys", [("C-q",), ("C-c", "C-c")], ids=["ctrl+q", "ctrl+c twice"])
def test_quitting_while_the_model_loads_exits_at_once(tmp_path, repo, keys):
    """The replay model's file is a FIFO nobody writes: the load stays blocked on it. Ctrl+Q
    ends the process while it is still blocked (before, the exit waited for the load thread:
    a minute for smollm2, then its conversion's progress bar printed over the shell)."""
    fifo = tmp_path / "never.json"
    os.mkfifo(fifo)
    term = Terminal(tmp_path, repo, f"--model replay:{fifo}")
    try:
        term.wait(r"Loading replay:never\.json")
        term.keys(*keys)  # both Ctrl+C in one go: the second is inside the 3 s quit window
        screen = term.wait(r"EXIT=\d+")
        assert "EXIT=0" in screen, screen
        after = screen[: screen.index("EXIT=")].strip().splitlines()
        assert not [line for line in after if line.strip()], screen  # nothing printed on the way out
    finally:
        term.close()
        try:  # a load thread still blocked (the process did not end): let it go
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, json.dumps({"completions": []}).encode())
            os.close(fd)
        except OSError:
            pass  # no reader left: the process is gone


def test_ignored_repository_settings_are_shown_in_the_chat_log(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (repo / ".clover").mkdir()
    (repo / ".clover" / "config.toml").write_text(
        'approval = "yolo"\nmodel = "openai:http://127.0.0.1:9/v1#elsewhere"\n')
    TrustStore().set(repo, True)
    script = write_replay(tmp_path, ["never"])
    term = Terminal(tmp_path, repo, f"--model replay:{script}")
    try:
        screen = term.wait(r"Type a request")
        screen = term.wait(r"your prompts")
        log = " ".join(" ".join(line.strip("▌ ").split()) for line in screen.splitlines())  # unwrapped
        assert re.search(r"Warning: .*?config\.toml: approval = 'yolo' ignored", log), log
        assert re.search(r"Warning: .*?config\.toml: model = 'openai:http://127\.0\.0\.1:9/v1#elsewhere' "
                         "ignored", log), log
        term.keys("C-q")
        screen = term.wait(r"EXIT=\d+")
        assert "EXIT=0" in screen and "saved to" not in screen, screen  # nothing was sent
    finally:
        term.close()
