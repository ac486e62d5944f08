"""The TUI driven through Textual's Pilot with the replay backend, real tools and a real git repo."""
from __future__ import annotations

import json

import pytest

from clover_cli.agent import events as ev
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import AgentEventMessage, SessionOptions
from clover_cli.tui.widgets.messages import AssistantMessage, NoticeLine, UserMessage
from clover_cli.tui.widgets.tool_panel import ToolPanel

from .conftest import make_app, submit, wait_for, wait_idle, wait_ready, write_replay
from .screen_text import screen_text

pytestmark = pytest.mark.timeout(180)  # a hang guard above the 60 s waits


def call(name: str, **arguments) -> str:
    """Tool-call markup as a model writes it."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


EDIT = call("edit_file", path="greet.py", old='"hello "', new='"hi "')


def notices(app) -> list[str]:
    return [n.message for n in app.chat.transcript.query(NoticeLine)]


async def test_prompt_streams_answer_and_tool_panel(repo):
    app = make_app(repo, ["Let me read it.\n" + call("read_file", path="greet.py"),
                          "`greet` returns **hello** plus the name."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "what does greet do?")
        await wait_idle(pilot)
        t = app.chat.transcript
        assert [u.text for u in t.query(UserMessage)] == ["what does greet do?"]
        answers = [a.text for a in t.query(AssistantMessage)]
        assert answers == ["Let me read it.\n", "`greet` returns **hello** plus the name."]
        (panel,) = t.query(ToolPanel)
        assert (panel.tool_name, panel.status) == ("read_file", "ok")
        assert "def greet(name):" in panel.output
        text = screen_text(app)
        assert "greet returns hello plus the name." in text  # Markdown rendered, markup gone
        assert "⚙ read_file greet.py  ✓ done" in text
        assert "<tool_call>" not in text
        assert "replay:script.json" in text and "⎇ main" in text


async def test_approval_yes_edits_and_undo_restores(repo):
    before = (repo / "greet.py").read_bytes()
    app = make_app(repo, ["Changing it.\n" + EDIT, "Now it says hi."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi instead")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        await pilot.pause(0.1)
        dialog = screen_text(app)
        assert "Allow edit_file? greet.py" in dialog
        assert '-    return "hello " + name' in dialog and '+    return "hi " + name' in dialog
        await pilot.press("y")
        await wait_idle(pilot)
        assert (repo / "greet.py").read_text() == 'def greet(name):\n    return "hi " + name\n'
        (panel,) = app.chat.transcript.query(ToolPanel)
        assert panel.status == "ok"
        await submit(pilot, "/diff")
        await wait_idle(pilot)
        assert '+    return "hi " + name' in screen_text(app)
        await submit(pilot, "/undo")
        await wait_idle(pilot)
        assert (repo / "greet.py").read_bytes() == before
        assert any("greet.py" in n for n in notices(app)), notices(app)


async def test_approval_no_with_feedback_reaches_the_model(repo):
    app = make_app(repo, [EDIT, "OK, leaving it."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi instead")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        await pilot.press("n")
        await pilot.press(*"nope")
        await pilot.press("enter")
        await wait_idle(pilot)
        assert "hello" in (repo / "greet.py").read_text()
        (panel,) = app.chat.transcript.query(ToolPanel)
        assert panel.status == "denied"
        last_prompt = app.chat.agent.backend.prompts[-1]
        tool_msgs = [m["content"] for m in last_prompt if m["role"] == "tool"]
        assert tool_msgs and "nope" in tool_msgs[-1]


async def test_always_is_remembered(repo):
    app = make_app(repo, [EDIT, "done", call("edit_file", path="greet.py", old='"hi "', new='"hey "'), "again"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "edit")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        await pilot.press("a")
        await wait_idle(pilot)
        await submit(pilot, "edit again")
        await wait_idle(pilot)  # no dialog this time
        assert '"hey "' in (repo / "greet.py").read_text()
        assert any("Approved" in n for n in notices(app))


async def test_help_lists_every_command(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "/help")
        await pilot.pause(0.2)
        text = screen_text(app)
        for usage in ("/help", "/undo", "/diff", "/clear", "/compact", "/model [SPEC]", "/threshold X",
                      "/denoise", "/approval MODE", "/sessions [ID]", "/quit"):
            assert usage in text, usage


async def test_ctrl_c_interrupts_then_second_quits(repo, monkeypatch):
    from clover_cli.tui.screens import stopping

    # a quit window no loaded machine can overrun between the two presses (the test waits for the
    # turn to end in between), and a turn that only the cancel can end (0.5 s a chunk: 200 s)
    monkeypatch.setattr(stopping, "QUIT_WINDOW_SECONDS", 600.0)
    long_answer = "word " * 400
    app = make_app(repo, [long_answer], chunk_chars=4, delay=0.5)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "talk a lot")
        await wait_for(pilot, lambda: any(a.text for a in app.chat.transcript.query(AssistantMessage)),
                       what="streaming to start")
        await pilot.press("ctrl+c")
        await wait_idle(pilot)
        (answer,) = app.chat.transcript.query(AssistantMessage)
        assert 0 < len(answer.text) < len(long_answer)
        assert "Interrupted." in notices(app)
        session_path = app.chat.agent.session_path
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
    assert app.return_value["session_path"] == str(session_path)
    assert session_path.is_file()


async def test_continue_resumes_the_last_session(repo):
    app = make_app(repo, ["First answer."])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "first question")
        await wait_idle(pilot)
        await submit(pilot, "/quit")
        await pilot.pause(0.1)
    session_id = app.return_value["session_id"]
    script = write_replay(repo.parent, ["Second answer."], "again.json")
    app2 = CloverApp(SessionOptions(model=f"replay:{script}", root=repo, resume="last"))
    async with app2.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await wait_idle(pilot)
        assert app2.chat.agent.session_id == session_id
        assert [u.text for u in app2.chat.transcript.query(UserMessage)] == ["first question"]
        assert "First answer." in screen_text(app2)
        await submit(pilot, "second question")
        await wait_idle(pilot)
        sent = app2.chat.agent.backend.prompts[-1]
        assert [m["content"] for m in sent if m["role"] == "user"] == ["first question", "second question"]


async def test_settings_commands_update_the_status_bar(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(100, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "/threshold 0.8")
        await submit(pilot, "/approval yolo")
        await pilot.pause(0.1)
        assert app.chat.agent.backend.threshold == 0.8
        assert app.chat.agent.config.approval == "yolo"
        status = app.chat.status.info.text()
        assert "yolo" in status
        await submit(pilot, "/threshold 2")
        await submit(pilot, "/nonsense")
        await pilot.pause(0.1)
        assert notices(app)[-2:] == ["Threshold must be in (0, 1], got 2",
                                     "Unknown command /nonsense. Type /help for the list."]


async def test_denoise_view_shows_masked_placeholders(repo):
    app = make_app(repo, [])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        chat = app.chat
        assert not chat.denoise.display
        await pilot.press("ctrl+t")
        assert chat.denoise.display
        chat.post_message(AgentEventMessage(ev.DenoiseProgress(2, 1, ("def", " f", "", "", ":"),
                                                               (False, False, True, True, False))))
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "def f░░:" in text and "block 2 · step 1 · 3/5" in text
        await submit(pilot, "/denoise")
        assert not chat.denoise.display


async def test_bad_model_is_a_notice_and_model_can_be_switched(repo):
    app = CloverApp(SessionOptions(model="replay:/does/not/exist.json", root=repo))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: any("not found" in n for n in notices(app)), what="the load error")
        assert app.chat.agent is None and app.chat.is_attached
        await submit(pilot, "hello?")
        await pilot.pause(0.1)
        assert "No model is loaded" in notices(app)[-1]
        script = write_replay(repo.parent, ["Loaded now."], "ok.json")
        await submit(pilot, f"/model replay:{script}")
        await wait_ready(pilot)
        await submit(pilot, "hello")
        await wait_idle(pilot)
        assert "Loaded now." in screen_text(app)
        assert "replay:ok.json" in app.chat.status.info.text()


async def test_ctrl_c_during_approval_denies_and_cancels(repo):
    before = (repo / "greet.py").read_bytes()
    app = make_app(repo, [EDIT, "never reached"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi instead")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        await pilot.press("ctrl+c")
        await wait_idle(pilot)
        assert app.chat.approval is None
        assert (repo / "greet.py").read_bytes() == before
        assert "Interrupted." in notices(app)
        assert app.chat.agent.backend.calls == 1  # the model was not asked again


async def test_ctrl_c_cancels_the_agent_before_the_approval_answer_wakes_it(repo):
    """The "no" wakes the agent thread at once; if the cancel came after it, the agent could ask
    the model again in between (a race a loaded machine hit)."""
    app = make_app(repo, [EDIT, "never reached"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await submit(pilot, "say hi instead")
        await wait_for(pilot, lambda: app.chat.approval is not None, what="the approval dialog")
        request, _ = app.chat.approval
        agent, seen = app.chat.agent, []
        answer = request.future.set_result

        def set_result(value):
            seen.append(agent._cancel.is_set())
            answer(value)

        request.future.set_result = set_result
        await pilot.press("ctrl+c")
        await wait_idle(pilot)
        assert seen and all(seen), seen
        assert "Interrupted." in notices(app)


async def test_failed_model_switch_keeps_the_loaded_model(repo):
    app = make_app(repo, ["still here"])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        agent = app.chat.agent
        await submit(pilot, "/model replay:/no/such/file.json")
        await wait_ready(pilot)
        assert app.chat.agent is agent and "not found" in notices(app)[-1]
        assert app.chat.options.model.endswith("script.json")
        await submit(pilot, "still there?")
        await wait_idle(pilot)
        assert "still here" in screen_text(app)


async def test_continue_without_a_session_starts_a_new_one(repo):
    script = write_replay(repo.parent, ["fresh"], "fresh.json")
    app = CloverApp(SessionOptions(model=f"replay:{script}", root=repo, resume="last"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        assert app.chat.agent is not None
        assert notices(app)[-1].startswith("no session to continue in ")
        assert notices(app)[-1].endswith("; started a new session.")
    app = CloverApp(SessionOptions(model=f"replay:{script}", root=repo, resume="nosuchid"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(notices(app)), what="the error")
        assert app.chat.agent is None and "no session 'nosuchid'" in notices(app)[-1]
