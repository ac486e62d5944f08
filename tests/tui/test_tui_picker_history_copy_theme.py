"""Pilot tests: @ file picker and attachments, persistent history with Ctrl+R, /copy
(OSC 52), /theme (remembered), the context meter, the queued first message, compaction summary."""
from __future__ import annotations

import base64
import json
import os
import re
import threading

import pytest

from clover_cli.agent.history import PromptHistory, history_path
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.prefs import prefs_path
from clover_cli.tui.widgets.messages import NoticeLine, SummaryEntry, UserMessage

from .conftest import git, make_app, submit, type_text, wait_for, wait_idle, wait_ready, write_replay
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


@pytest.fixture
def calc_repo(repo):
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / ".gitignore").write_text("secret_cache.py\n")
    git(repo, "add", "calc.py", ".gitignore")
    git(repo, "commit", "-q", "-m", "calc")
    (repo / "untracked_cart.py").write_text("x = 1\n")  # untracked, not ignored: offered
    (repo / "secret_cache.py").write_text("y = 2\n")  # ignored: never offered
    return repo


async def test_at_picker_inserts_the_path_and_attaches_the_file(calc_repo):
    app = make_app(calc_repo, ["It adds."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        prompt = app.chat.prompt
        await type_text(pilot, "explain @ca")
        await pilot.pause(0.05)
        picker = app.chat.picker
        assert picker.active and picker.selected == "calc.py", picker.matches
        assert "untracked_cart.py" in picker.matches and "secret_cache.py" not in picker.matches
        assert app.focused is prompt
        await pilot.press("enter")
        assert prompt.text == "explain @calc.py " and not picker.active
        await pilot.press("enter")
        await wait_idle(pilot)
        sent = [m["content"] for m in app.chat.agent.backend.prompts[-1] if m["role"] == "user"][-1]
        assert sent.startswith("explain @calc.py")
        assert "Attached file `calc.py`:" in sent and "return a + b" in sent
        assert [u.text for u in app.chat.transcript.query(UserMessage)] == ["explain @calc.py"]
        assert "Attached calc.py." in notices(app)


async def test_at_picker_keys_choose_and_escape_closes(calc_repo):
    app = make_app(calc_repo, [])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await type_text(pilot, "@py")
        await pilot.pause(0.05)
        picker = app.chat.picker
        first, second = picker.matches[0], picker.matches[1]
        await pilot.press("down", "tab")
        assert app.chat.prompt.text == f"@{second} " and first != second
        await type_text(pilot, "@zzzz")
        await pilot.pause(0.05)
        assert picker.active and not picker.matches
        await pilot.press("escape")
        assert not picker.active and app.chat.prompt.text.endswith("@zzzz")


async def test_history_survives_a_restart_and_ctrl_r_finds_an_old_entry(repo):
    app = make_app(repo, ["a", "b", "c"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        for text in ("remember the milk", "fix the parser", "run the tests"):
            await submit(pilot, text)
            await wait_idle(pilot)
    path = history_path(repo)
    assert path.is_file() and str(repo) not in str(path)  # outside the repository
    with open(path, "a", encoding="utf-8") as f:
        f.write("{not json\n")  # a corrupt line is skipped
    script = write_replay(repo.parent, [], "again.json")
    app2 = CloverApp(SessionOptions(model=f"replay:{script}", root=repo))
    async with app2.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        prompt = app2.chat.prompt
        await pilot.press("up")
        assert prompt.text == "run the tests"
        await pilot.press("down")
        await pilot.press("ctrl+r")
        await type_text(pilot, "milk")
        assert prompt.text == "remember the milk"
        assert "reverse search" in screen_text(app2)
        await pilot.press("enter")  # keeps the found entry for editing; does not send
        assert prompt.text == "remember the milk" and app2.chat.prompt.search is None
        await pilot.press("ctrl+r")
        await type_text(pilot, "the")
        assert prompt.text == "run the tests"
        await pilot.press("ctrl+r")
        assert prompt.text == "fix the parser"
        await pilot.press("escape")  # cancels: the draft (the kept entry) comes back
        assert prompt.text == "remember the milk"


def test_history_is_bounded_and_skips_corrupt_lines(tmp_path):
    path = tmp_path / "history.jsonl"
    lines = [json.dumps({"text": f"p{i}"}) for i in range(30)] + ["garbage", json.dumps([1]), ""]
    path.write_text("\n".join(lines) + "\n")
    h = PromptHistory(path, limit=10)
    assert h.entries == [f"p{i}" for i in range(20, 30)]
    assert len(path.read_text().splitlines()) == 10  # rewritten once it grew past twice the limit
    h.add("p29")  # a repeat of the last collapses
    h.add("new")
    assert PromptHistory(path, limit=10).entries[-2:] == ["p29", "new"]
    assert h.search("p2") == 8 and h.search("p2", 8) == 7 and h.search("zz") is None


ANSWER = "Two ways:\n\n```python\nprint(1)\n```\n\nor\n\n```sh\necho 2\n```\n"


async def test_copy_emits_osc52_for_the_answer_and_a_code_block(repo):
    app = make_app(repo, [ANSWER])
    async with app.run_test(size=(100, 24)) as pilot:
        written: list[str] = []
        real_write = app._driver.write
        app._driver.write = lambda data: (written.append(data), real_write(data))[1]
        await wait_ready(pilot)
        await submit(pilot, "/copy")
        await pilot.pause(0.05)
        assert "Nothing to copy yet" in notices(app)[-1]
        await submit(pilot, "how?")
        await wait_idle(pilot)
        await submit(pilot, "/copy 2")
        await submit(pilot, "/copy")
        await submit(pilot, "/copy 3")
        await pilot.pause(0.1)
        sequences = [m.group(1) for d in written for m in re.finditer(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07", d)]
        assert [base64.b64decode(s).decode() for s in sequences] == ["echo 2\n", ANSWER.strip("\n")]
        assert notices(app)[-1] == "The last answer has only 2 code blocks; /copy 3 needs 3."
        copied = [n for n in notices(app) if n.startswith("Copied")]
        assert copied[0].startswith("Copied code block 2 (1 line) to the clipboard (OSC 52).")
        assert "If your terminal ignores OSC 52, the text is also in" in copied[0]


async def test_theme_is_switched_and_remembered(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        assert app.theme == "textual-dark"
        background = app.chat.styles.background
        await submit(pilot, "/theme light")
        await pilot.pause(0.1)
        assert app.theme == "textual-light" and app.chat.styles.background != background
        await submit(pilot, "/theme nosuch")
        await pilot.pause(0.05)
        assert "Unknown theme 'nosuch'" in notices(app)[-1]
    assert json.loads(prefs_path().read_text())["theme"] == "textual-light"
    assert str(prefs_path()).startswith(os.environ["XDG_CONFIG_HOME"])
    app2 = make_app(repo, [])
    async with app2.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        assert app2.theme == "textual-light"


async def test_context_meter_turns_amber_then_red(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_ready(pilot)
        status = app.chat.status

        def meter_style() -> str:
            text = status.rendered()
            start = text.plain.index("ctx ")
            return " ".join(str(span.style) for span in text.spans if span.start <= start < span.end)

        status.set(context_used=1000, context_window=4096)
        assert status.info.context_level() == "ok" and meter_style() == ""
        status.set(context_used=3300)  # 80.6%
        colours = app.get_css_variables()
        assert status.info.context_level() == "warn" and colours["warning"].lower() in meter_style().lower()
        status.set(context_used=3900)  # 95.2%
        assert status.info.context_level() == "full" and colours["error"].lower() in meter_style().lower()


async def test_first_message_waits_for_the_load_visibly(repo):
    fifo = repo.parent / "slow.json"
    os.mkfifo(fifo)  # the replay backend's read blocks until the test writes the script
    writer = threading.Thread(target=fifo.write_text, args=(json.dumps({"completions": ["Hi there.", "Second."]}),))
    app = CloverApp(SessionOptions(model=f"replay:{fifo}", root=repo))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.chat.busy == "loading", what="loading")
            assert app.focused is app.chat.prompt  # usable at once
            await submit(pilot, "hello early")
            await pilot.pause(0.1)
            (shown,) = app.chat.transcript.query(UserMessage)
            assert shown.queued and "queued" in screen_text(app)
            assert "1 queued message, sent when ready" in screen_text(app)
            await submit(pilot, "and another")
            await pilot.pause(0.6)
            assert "2 queued messages, sent when ready" in screen_text(app)
            writer.start()
            await wait_ready(pilot)
            await wait_for(pilot, lambda: app.chat.agent.backend.calls == 2 and not app.chat.busy,
                           what="both queued messages answered")
            await wait_idle(pilot)
            assert not any(u.queued for u in app.chat.transcript.query(UserMessage))
            assert "Hi there." in screen_text(app) and "Second." in screen_text(app)
            assert "queued" not in screen_text(app)
            sent = [m["content"] for m in app.chat.agent.backend.prompts[-1] if m["role"] == "user"]
            assert sent == ["hello early", "and another"]
    finally:
        if not writer.is_alive() and writer.ident is None:
            writer.start()  # never leave the loading thread blocked on the FIFO
        writer.join()


async def test_compaction_summary_is_its_own_entry_live_and_on_resume(repo):
    app = make_app(repo, ["first answer", "second answer", "SUMMARY: the user asked a question."])
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "a question")
        await wait_idle(pilot)
        await submit(pilot, "another question")
        await wait_idle(pilot)
        await submit(pilot, "/compact")
        await wait_idle(pilot)
        (entry,) = app.chat.transcript.query(SummaryEntry)
        assert "the user asked a question" in entry.text
        assert "summary" in str(entry.title)
        await submit(pilot, "/quit")
    script = write_replay(repo.parent, [], "resume.json")
    app2 = CloverApp(SessionOptions(model=f"replay:{script}", root=repo, resume="last"))
    async with app2.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await wait_idle(pilot)
        users = [u.text for u in app2.chat.transcript.query(UserMessage)]
        assert not any("compacted" in u for u in users), users
        assert len(app2.chat.transcript.query(SummaryEntry)) == 1
