"""`clover acp` end to end: an ACP client (the `agent-client-protocol` SDK's client side) spawns
it, opens a session, and runs a scripted-model turn: prompt -> streamed message chunks -> a tool
call with a permission request -> its result -> end of turn; then a rejected call and a cancel."""
import asyncio
import os
import sys

import pytest

from .helpers import call, make_repo, replay

pytestmark = pytest.mark.slow


class Recorder:
    """The editor's side: records every session update and answers permission requests."""

    def __init__(self, answer: str) -> None:
        self.updates: list = []
        self.permissions: list = []
        self.answer = answer

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
        self.permissions.append((tool_call, [o.option_id for o in options]))
        if self.answer == "cancel":  # the user presses Escape in the editor: the turn is cancelled
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answer))


async def _session(repo, spec, answer, prompt_text):
    from acp import PROTOCOL_VERSION, text_block
    from acp.stdio import spawn_agent_process

    client = Recorder(answer)

    def bind(conn):
        client.conn = conn
        return client
    async with spawn_agent_process(bind, sys.executable, "-m", "clover_cli.cli", "acp", "--model", spec,
                                   env=os.environ.copy(), cwd=str(repo)) as (conn, _proc):
        init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 120)
        assert init.agent_info.name == "clover"
        session = await asyncio.wait_for(conn.new_session(cwd=str(repo), mcp_servers=[]), 120)
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                    prompt=[text_block(prompt_text)]), 120)
    return client, result


def test_a_turn_with_a_permission_request_end_to_end(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, ["I will write the file.\n" + call("write_file", path="notes.txt",
                                                                content="hello from acp\n"),
                             "Wrote notes.txt."])
    client, result = asyncio.run(_session(repo, spec, "yes", "write a note"))
    assert result.stop_reason == "end_turn"
    kinds = [u.session_update for u in client.updates]
    text = "".join(u.content.text for u in client.updates if u.session_update == "agent_message_chunk")
    assert "I will write the file." in text and "Wrote notes.txt." in text and "<tool_call>" not in text
    start = next(u for u in client.updates if u.session_update == "tool_call")
    assert start.status == "pending" and start.kind == "edit" and start.title.startswith("write_file")
    done = next(u for u in client.updates if u.session_update == "tool_call_update")
    assert done.tool_call_id == start.tool_call_id and done.status == "completed"
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    assert len(client.permissions) == 1 and client.permissions[0][0].tool_call_id == start.tool_call_id
    assert "yes" in client.permissions[0][1] and "no" in client.permissions[0][1]
    assert (repo / "notes.txt").read_text() == "hello from acp\n"


def test_a_rejected_permission_is_not_run(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("write_file", path="notes.txt", content="no\n"), "OK, I will not."])
    client, result = asyncio.run(_session(repo, spec, "no", "write a note"))
    assert result.stop_reason == "end_turn" and not (repo / "notes.txt").exists()
    done = next(u for u in client.updates if u.session_update == "tool_call_update")
    assert done.status == "failed"


def test_cancel_ends_the_turn_cancelled(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("write_file", path="notes.txt", content="no\n"), "never said"])
    client, result = asyncio.run(_session(repo, spec, "cancel", "write a note"))
    assert result.stop_reason == "cancelled" and not (repo / "notes.txt").exists()
    text = "".join(u.content.text for u in client.updates if u.session_update == "agent_message_chunk")
    assert "never said" not in text
