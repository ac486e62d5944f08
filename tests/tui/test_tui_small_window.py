"""A small context window in the TUI (docs/agent.md, "Context window"): a long message is cut with
a notice, and the summary the transcript shows is the one the session file holds."""
from __future__ import annotations

import json

from clover_cli.agent.session import load_messages
from clover_cli.tui.widgets.messages import NoticeLine, SummaryEntry

from .conftest import make_app, submit, wait_idle, wait_ready


async def test_cut_notice_and_summary_match_the_session_file(repo):
    app = make_app(repo, ["first answer", "SUMMARY-OF-EARLIER-PART", "second answer"])
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        agent = app.chat.agent
        base = agent.backend.count_tokens(agent.messages, agent.tools)
        agent.config.context_window = (base + 300) * 4 // 3 + 1  # room for ~300 tokens of conversation
        await submit(pilot, "paste: " + "lorem ipsum " * 300)
        await wait_idle(pilot)
        await submit(pilot, "second question " * 20)
        await wait_idle(pilot)
        t = app.chat.transcript
        notices = [n.message for n in t.query(NoticeLine)]
        assert any(m.startswith("Cut your message to fit") for m in notices), notices
        (summary,) = t.query(SummaryEntry)
        assert summary.text.endswith("SUMMARY-OF-EARLIER-PART") and "second question" not in summary.text
        records = [json.loads(line) for line in agent.session_path.read_text().splitlines()]
        assert [r["summary"] for r in records if r["type"] == "compaction"] == ["SUMMARY-OF-EARLIER-PART"]
        _, saved, _ = load_messages(agent.session_path)
        assert saved == agent.messages and summary.text in saved[1]["summary"]
        assert [r["message"] for r in records if r["type"] == "notice"] == \
            [m for m in notices if m.startswith(("Cut ", "Compacted "))]
