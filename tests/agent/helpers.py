"""Shared helpers for the agent tests: real repositories, replay scripts, a turn driver."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import ApprovalAnswer, ApprovalRequested, TurnFinished

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CHECK = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('PASSED')\n"


def call(name: str, **arguments) -> str:
    """One Hermes-format tool call as a model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def make_repo(root: Path, git: bool = True) -> Path:
    """A small Python project with a bug in calc.add, optionally a git repo with one commit."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text(CALC)
    (root / "check_calc.py").write_text(CHECK)
    if git:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
        subprocess.run(["git", "add", "."], cwd=root, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True, env=env)
    return root


def replay(tmp: Path, completions: list[str], name: str = "script.json") -> str:
    """Writes a replay file and returns its model spec."""
    path = tmp / name
    path.write_text(json.dumps({"completions": completions}))
    return f"replay:{path}"


def new_agent(root: Path, completions: list[str], **cfg) -> Agent:
    backend_opts = cfg.pop("backend_opts", {})
    backend = make_backend(replay(root.parent, completions, f"{root.name}-script.json"), **backend_opts)
    return Agent(backend, AgentConfig(root=root, **cfg))


def drive(agent: Agent, text: str, answers: list[ApprovalAnswer] = (), on_event=None, timeout: float = 60):
    """Runs one turn in a worker thread (as front ends do); this thread answers approvals from
    `answers` in order. Returns every event; `on_event(ev)` sees each one as it arrives."""
    events: queue.Queue = queue.Queue()
    answers = list(answers)

    def work():
        try:
            for ev in agent.run_turn(text):
                events.put(ev)
        except BaseException as e:  # surface loop crashes in the test thread
            events.put(e)
        events.put(None)

    threading.Thread(target=work, daemon=True).start()
    seen = []
    while True:
        ev = events.get(timeout=timeout)
        if ev is None:
            break
        if isinstance(ev, BaseException):
            raise ev
        seen.append(ev)
        if on_event is not None:
            on_event(ev)
        if isinstance(ev, ApprovalRequested):
            ev.future.set_result(answers.pop(0))
    assert isinstance(seen[-1], TurnFinished), seen[-1]
    return seen


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def clover_in_process(*args, env: dict | None = None):
    """`clover ARGS` in-process (tests/in_process.py), `env` set for the call."""
    from in_process import clover

    return clover(*args, env=env)
