"""`clover acp` answers `initialize` before the model is loaded, keeps the API key out of its
protocol stream, says a silent server's wait on screen, and takes --request-timeout.

Real `clover acp` processes driven by the ACP SDK's client side, a FIFO the test writes to as the
model's load (a replay file blocks until its writer comes), and a scripted OpenAI-compatible
server on 127.0.0.1 that echoes the key or holds its answer until the test releases it."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading

import pytest

from .helpers import make_repo
from .openai_server import ScriptedServer, sse_text

pytestmark = pytest.mark.slow  # each case runs a real `clover acp` process

KEY = "sk-live-7Hq2Lm9Xc4Vb8Nz1"


class Recorder:
    """The editor's side: every session update, as text too (what the editor would be shown)."""

    def __init__(self, on_update=None) -> None:
        self.updates: list = []
        self.on_update = on_update

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)
        if self.on_update:
            self.on_update(update)

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        from acp.schema import DeniedOutcome, RequestPermissionResponse
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    def text(self) -> str:
        return "\n".join(u.model_dump_json() for u in self.updates)

    def message(self) -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == "agent_message_chunk")


def _env(tmp_path, **extra):
    return {**os.environ, "OPENAI_API_KEY": KEY, "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra}


async def _drive(repo, args, env, client, steps):
    """Spawn `clover acp ARGS`, then run `steps(conn)`; returns what steps returns and stderr."""
    from acp.stdio import spawn_agent_process

    def bind(conn):
        client.conn = conn
        return client
    async with spawn_agent_process(bind, sys.executable, "-m", "clover_cli.cli", "acp", *args,
                                   env=env, cwd=str(repo)) as (conn, proc):
        return await steps(conn)


def _sessions(tmp_path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "state").rglob("*.jsonl"))


def test_initialize_and_new_session_answer_while_the_model_still_loads(tmp_path):
    """The replay file is a FIFO with no writer: the load blocks until the test writes it. Both
    answers come before that; the prompt then waits for the load and runs the turn."""
    from acp import PROTOCOL_VERSION, text_block
    repo = make_repo(tmp_path / "repo", git=False)
    fifo = tmp_path / "script.json"
    os.mkfifo(fifo)
    client = Recorder()

    async def steps(conn):
        init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
        session = await asyncio.wait_for(conn.new_session(cwd=str(repo), mcp_servers=[]), 60)
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[text_block("hi")]))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, fifo.write_text, json.dumps({"completions": ["Loaded and answering."]}))
        result = await asyncio.wait_for(prompt, 60)
        return init, result

    init, result = asyncio.run(_drive(repo, ["--model", f"replay:{fifo}"], _env(tmp_path), client, steps))
    assert init.agent_info.name == "clover"
    assert result.stop_reason == "end_turn"
    assert "Loaded and answering." in client.message()


def test_a_failed_load_is_the_prompts_protocol_error(tmp_path):
    from acp import PROTOCOL_VERSION, RequestError, text_block
    repo = make_repo(tmp_path / "repo", git=False)
    fifo = tmp_path / "script.json"
    os.mkfifo(fifo)

    async def steps(conn):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
        session = await asyncio.wait_for(conn.new_session(cwd=str(repo), mcp_servers=[]), 60)
        await asyncio.get_running_loop().run_in_executor(None, fifo.write_text, "{not json")
        with pytest.raises(RequestError) as caught:
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("hi")]), 60)
        return caught.value

    error = asyncio.run(_drive(repo, ["--model", f"replay:{fifo}"], _env(tmp_path), Recorder(), steps))
    assert "not valid JSON" in json.dumps(error.data), error.data


def _one_prompt(tmp_path, server, client, *extra, env_extra=None):
    from acp import PROTOCOL_VERSION, text_block
    repo = make_repo(tmp_path / "repo", git=False)

    async def steps(conn):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
        session = await asyncio.wait_for(conn.new_session(cwd=str(repo), mcp_servers=[]), 60)
        try:
            return await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                      prompt=[text_block("say hi")]), 120)
        except Exception as exc:  # noqa: BLE001 - a protocol error is part of what the editor sees
            return exc

    args = ["--model", f"openai:{server.base_url}#m", *extra]
    return asyncio.run(_drive(repo, args, _env(tmp_path, **(env_extra or {})), client, steps))


def test_a_key_echoed_over_chunks_never_reaches_the_editor_or_the_session_file(tmp_path):
    answer = sse_text("Your key is s", KEY[1:9], KEY[9:], " and that is all.")
    client = Recorder()
    with ScriptedServer([answer]) as server:
        result = _one_prompt(tmp_path, server, client)
    assert server.requests[0]["headers"].get("Authorization") == f"Bearer {KEY}"
    shown = client.text()
    assert getattr(result, "stop_reason", None) == "end_turn", result
    assert KEY not in shown and KEY[1:9] not in shown, shown
    text = client.message()
    assert "Your key is [REDACTED] and that is all." in text, text
    assert KEY not in _sessions(tmp_path) and "[REDACTED]" in _sessions(tmp_path)


def test_a_key_quoted_in_a_server_error_never_reaches_the_editor(tmp_path):
    error = {"status": 400, "body": {"error": {"message": f"invalid api key: Bearer {KEY}",
                                               "type": "invalid_request_error"}}}
    client = Recorder()
    with ScriptedServer([error] * 4) as server:
        result = _one_prompt(tmp_path, server, client)
    everything = client.text() + repr(result) + json.dumps(getattr(result, "data", None)) + _sessions(tmp_path)
    assert KEY not in everything, everything
    assert "invalid api key: Bearer [REDACTED]" in everything, everything


def test_a_silent_server_is_said_and_request_timeout_is_taken(tmp_path):
    """The server holds its answer until the editor has been told of the wait (no clock in the
    test: the notice releases the server). --request-timeout appears in the notice."""
    released = threading.Event()

    def hold(body):
        released.wait(120)  # the answer comes only once the wait was shown
        return None

    def on_update(update):
        if update.session_update == "agent_thought_chunk" and "waiting for" in update.content.text:
            released.set()

    client = Recorder(on_update)
    with ScriptedServer([sse_text("Here at last.")], check=hold) as server:
        result = _one_prompt(tmp_path, server, client, "--request-timeout", "77",
                             env_extra={"CLOVER_WAIT_NOTICE_S": "0.2"})
    assert getattr(result, "stop_reason", None) == "end_turn", result
    thoughts = [u.content.text for u in client.updates if u.session_update == "agent_thought_chunk"]
    waits = [t for t in thoughts if "waiting for" in t]
    assert waits and server.base_url in waits[0] and "77 s (--request-timeout)" in waits[0], thoughts
    kinds = [(u.session_update, getattr(u.content, "text", "")) for u in client.updates]
    first_wait = next(i for i, (k, t) in enumerate(kinds) if "waiting for" in t)
    answer = next(i for i, (k, t) in enumerate(kinds) if k == "agent_message_chunk")
    assert first_wait < answer


@pytest.mark.parametrize("command", ["chat", "run", "fix", "swebench", "acp"])
def test_every_command_that_can_reach_a_server_takes_request_timeout(command):
    from click.testing import CliRunner

    from clover_cli.cli import cli
    result = CliRunner().invoke(cli, [command, "--help"], prog_name="clover")
    assert result.exit_code == 0 and "--request-timeout" in result.stdout, result.stdout
