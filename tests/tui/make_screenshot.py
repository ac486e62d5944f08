"""Write docs/tui-screenshot.svg: a scripted session (replay model, real tools, a temp git repo).

Run from the repository root: .venv/bin/python -m tests.tui.make_screenshot [docs/tui-screenshot.svg]
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from .conftest import git, make_app, submit, wait_for, wait_idle, wait_ready

EDIT = "<tool_call>" + json.dumps({"name": "edit_file", "arguments": {
    "path": "greet.py", "old": '"hello "', "new": '"hi "'}}) + "</tool_call>"
SCRIPT = ["<think>The user wants hi.</think>I'll change the greeting.\n" + EDIT,
          "Done. `greet` now says:\n\n```python\nreturn \"hi \" + name\n```\n\n- nothing else changed"]


async def shoot(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            os.environ[var] = os.path.join(tmp, var.lower())
        root = Path(tmp) / "repo"
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        (root / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
        git(root, "add", "greet.py")
        git(root, "commit", "-q", "-m", "init")
        app = make_app(root, SCRIPT, approval="auto-edit")
        async with app.run_test(size=(80, 24)) as pilot:  # the size docs/tui.md names
            await wait_ready(pilot)
            app.chat.prompt.cursor_blink = False
            await submit(pilot, "make greet say hi")
            await wait_idle(pilot)
            chat = app.chat
            await wait_for(pilot, lambda: not chat.transcript.dirty, what="a drawn frame")
            # the status bar as it is: a replay model shows no TPF or tok/s (docs/tui.md, "Screen")
            await pilot.press(*"explain @gr")
            await pilot.pause(0.3)
            app.save_screenshot(filename=out.name, path=str(out.parent))


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/tui-screenshot.svg").resolve()
    asyncio.run(shoot(target))
    print(target)
