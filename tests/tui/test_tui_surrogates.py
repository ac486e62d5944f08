"""The TUI's file output survives model text that is not valid UTF-8: /copy of an
answer with a lone surrogate sends U+FFFD over OSC 52 and into copied.txt, no crash."""
from __future__ import annotations

import base64
import re

import pytest

from clover_cli.tools.statedir import repo_state_dir

from .conftest import make_app, submit, wait_idle, wait_ready

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


async def test_copy_of_an_answer_with_a_lone_surrogate(repo):
    app = make_app(repo, ["bad \ud800 answer"])
    async with app.run_test(size=(100, 24)) as pilot:
        written: list[str] = []
        real_write = app._driver.write
        app._driver.write = lambda data: (written.append(data), real_write(data))[1]
        await wait_ready(pilot)
        await submit(pilot, "go")
        await wait_idle(pilot)
        await submit(pilot, "/copy")
        await pilot.pause(0.1)
        sequences = [m.group(1) for d in written for m in re.finditer(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07", d)]
        assert [base64.b64decode(s).decode() for s in sequences] == ["bad \ufffd answer"]
    assert (repo_state_dir(repo) / "copied.txt").read_text(encoding="utf-8") == "bad \ufffd answer"
