"""Fixtures for the TUI tests: real repositories, replay scripts and a running CloverApp."""
from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import time
from pathlib import Path

import pytest

from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions


def git(root: Path, *args: str) -> str:
    """Run git in `root` with a fixed identity; returns stdout."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests here with asyncio.run (no asyncio plugin is installed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository on branch `main` with one committed Python file."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
    git(root, "add", "greet.py")
    git(root, "commit", "-q", "-m", "init")
    return root


@pytest.fixture(autouse=True)
def _no_approval_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pilot tests answer a dialog the moment it shows; the guard window against stray keys
    (ApprovalDialog.GUARD_SECONDS) has its own test in test_tui_focus_escape_approval.py."""
    from clover_cli.tui.screens.approval import ApprovalDialog

    monkeypatch.setattr(ApprovalDialog, "GUARD_SECONDS", 0.0)


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the user's ~/.config/clover out of the tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def write_replay(folder: Path, completions: list[str], name: str = "script.json") -> Path:
    """Write a replay script {"completions": [...]} and return its path."""
    path = folder / name
    path.write_text(json.dumps({"completions": completions}), encoding="utf-8")
    return path


def make_app(repo: Path, completions: list[str], approval: str = "ask", **backend_options) -> CloverApp:
    """A CloverApp on `repo` driven by the replay backend with `completions`."""
    script = write_replay(repo.parent, completions)
    return CloverApp(SessionOptions(model=f"replay:{script}", root=repo, approval=approval,
                                    backend_options=backend_options))


async def wait_for(pilot, condition, timeout: float = 60.0, what: str = "condition") -> None:
    """Let the app run until `condition()` is true (fails the test after `timeout` seconds: a hang
    guard no loaded machine reaches, never a bound on how fast something is)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def wait_ready(pilot) -> None:
    """Wait until the model is loaded and nothing is running."""
    chat = pilot.app.chat
    await wait_for(pilot, lambda: chat.is_mounted and chat.agent is not None and not chat.busy,
                   what="the agent to be ready")


async def wait_idle(pilot) -> None:
    """Wait until the running turn or command has finished and the last frame was drawn."""
    chat = pilot.app.chat
    await wait_for(pilot, lambda: not chat.busy and not chat.transcript.dirty, what="the turn to end")
    await pilot.pause(0.1)


async def type_text(pilot, text: str) -> None:
    """Type `text` into the focused prompt (characters; newlines as ctrl+j) without sending."""
    keys = []
    for ch in text:
        keys.append("ctrl+j" if ch == "\n" else {" ": "space", "/": "slash"}.get(ch, ch))
    await pilot.press(*keys)


async def submit(pilot, text: str) -> None:
    """Type `text` and press Enter."""
    prompt = pilot.app.chat.query_one("#prompt")
    prompt.load_text(text)
    prompt.move_cursor(prompt.document.end)
    await pilot.press("enter")
