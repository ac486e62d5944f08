"""The openai: backend against a scripted local server (loopback only)."""
import json
import socket
import threading
import time

import pytest

from clover_cli.agent.backends import BackendError, Completion, make_backend
from clover_cli.agent.events import BlockText

from .openai_server import ScriptedServer, sse_text, sse_tool_call

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def drain(backend, messages, **kw):
    items = list(backend.stream(messages, TOOLS, **kw))
    assert isinstance(items[-1], Completion)
    return items[:-1], items[-1]


def test_streaming_text_and_request_shape(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ScriptedServer([sse_text("Hel", "lo <think", ">x</thi", "nk> world")]) as srv:
        b = make_backend(f"openai:{srv.base_url}#my-model")
        blocks, comp = drain(b, [{"role": "user", "content": "hi"}], max_new_tokens=77)
    assert comp.text == "Hello <think>x</think> world" and comp.tool_calls == ()
    assert "".join(x.text for x in blocks if not x.thinking) == "Hello  world"
    assert "".join(x.text for x in blocks if x.thinking) == "x"
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"]["stream"] is True and req["body"]["model"] == "my-model"
    assert req["body"]["tools"] == TOOLS and req["body"]["max_tokens"] == 77


def test_native_tool_call_assembled_and_tool_messages_sent(monkeypatch):
    monkeypatch.setenv("MY_KEY", "k2")
    with ScriptedServer([sse_tool_call("call_9", "read_file", ['{"pa', 'th": "a', '.py"}'], text="Reading.")]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", api_key_env="MY_KEY")
        history = [{"role": "user", "content": "go"},
                   {"role": "assistant", "content": '<tool_call>{"name": "read_file", "arguments": {"path": "b"}}</tool_call>',
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "b"}}}]},
                   {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "B"}]
        _, comp = drain(b, history)
    assert comp.tool_calls[0].id == "call_9" and comp.tool_calls[0].name == "read_file"
    assert json.loads(comp.tool_calls[0].arguments) == {"path": "a.py"}
    assert comp.stats["generated_tokens"] == 7 and comp.finish_reason == "tool_calls"
    sent = srv.requests[0]["body"]["messages"]
    assert srv.requests[0]["headers"]["Authorization"] == "Bearer k2"
    assert sent[1]["content"] is None  # the text markup became native tool_calls
    assert sent[1]["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "b"}'}
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "B"}


def test_retries_503_then_succeeds():
    with ScriptedServer([{"status": 503, "body": {"error": {"message": "overloaded"}}},
                         {"status": 429, "body": {}}, sse_text("ok")]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", backoff=0.01)
        _, comp = drain(b, [{"role": "user", "content": "hi"}])
    assert comp.text == "ok" and len(srv.requests) == 3


def test_gives_up_after_retries_with_clear_error():
    with ScriptedServer([{"status": 503, "body": {"error": {"message": "overloaded"}}}] * 3) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", backoff=0.01, retries=2)
        with pytest.raises(BackendError, match=r"returned HTTP 503: overloaded"):
            drain(b, [{"role": "user", "content": "hi"}])
    assert len(srv.requests) == 3


def test_4xx_is_not_retried():
    with ScriptedServer([{"status": 401, "body": {"error": {"message": "bad key"}}}, sse_text("no")]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", backoff=0.01)
        with pytest.raises(BackendError, match="HTTP 401: bad key"):
            drain(b, [{"role": "user", "content": "hi"}])
    assert len(srv.requests) == 1


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    b = make_backend(f"openai:http://127.0.0.1:{port}/v1#m")
    with pytest.raises(BackendError, match="connection refused"):
        drain(b, [{"role": "user", "content": "hi"}])


def test_timeout():
    with ScriptedServer([{"sleep": 1.5}]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", timeout=0.3, retries=0)
        t0 = time.monotonic()
        with pytest.raises(BackendError, match="did not answer within 0.3 s"):
            drain(b, [{"role": "user", "content": "hi"}])
        assert time.monotonic() - t0 < 1.4


def test_missing_key_env_is_an_error():
    with pytest.raises(BackendError, match="NO_SUCH_VAR_XYZ"):
        make_backend("openai:http://127.0.0.1:9/v1#m", api_key_env="NO_SUCH_VAR_XYZ")


def test_cancel_stops_stream():
    chunks = sse_text(*["x"] * 5)
    with ScriptedServer([chunks]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m")
        cancel = threading.Event()
        cancel.set()
        _, comp = drain(b, [{"role": "user", "content": "hi"}], cancel=cancel)
    assert comp.finish_reason == "cancelled"


def test_agent_turn_over_openai_native_and_text_calls(tmp_path):
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.events import ToolFinished, TurnFinished

    from .helpers import call, make_repo

    repo = make_repo(tmp_path / "repo", git=False)
    responses = [sse_tool_call("call_A", "read_file", ['{"path": ', '"calc.py"}'], text="Reading. "),
                 sse_text("Now grep.\n", call("grep", pattern="def mul")[:20], call("grep", pattern="def mul")[20:]),
                 sse_text("add subtracts; mul multiplies.")]
    with ScriptedServer(responses) as srv:
        agent = Agent(make_backend(f"openai:{srv.base_url}#m"), AgentConfig(root=repo))
        events = list(agent.run_turn("What do the functions do?"))
    end = events[-1]
    assert isinstance(end, TurnFinished) and (end.reason, end.final_text) == ("done", "add subtracts; mul multiplies.")
    results = [e for e in events if isinstance(e, ToolFinished)]
    assert [(r.call_id, r.name, r.ok) for r in results][0] == ("call_A", "read_file", True)
    assert results[1].name == "grep" and "def mul" in results[1].output
    second = srv.requests[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_A"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_A"
    assert "return a - b" in second[-1]["content"]
    third = srv.requests[2]["body"]["messages"]
    # the text-format call went back as a native call with the tool result matched to it
    assert third[-2]["content"] == "Now grep." and third[-2]["tool_calls"][0]["function"]["name"] == "grep"
    assert third[-1]["tool_call_id"] == third[-2]["tool_calls"][0]["id"]
    assert all(r["body"]["tools"] == agent.tools for r in srv.requests)


def test_agent_reports_server_error_and_ends_turn(tmp_path):
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.events import AgentError

    from .helpers import make_repo

    repo = make_repo(tmp_path / "repo", git=False)
    with ScriptedServer([{"status": 400, "body": {"error": {"message": "model not found"}}}]) as srv:
        agent = Agent(make_backend(f"openai:{srv.base_url}#m"), AgentConfig(root=repo))
        events = list(agent.run_turn("hi"))
    errors = [e for e in events if isinstance(e, AgentError)]
    assert errors[0].fatal and "HTTP 400: model not found" in errors[0].message
    assert events[-1].reason == "error"
    assert [m["role"] for m in agent.messages] == ["system", "user"]


def test_call_cut_off_by_token_limit_is_not_run(tmp_path):
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.events import ToolCallProposed

    from .helpers import make_repo

    repo = make_repo(tmp_path / "repo", git=False)
    cut = '<tool_call>{"name": "write_file", "arguments": {"path": "calc.py", "content": "def add(a, b):\\n'
    chunks = [{"choices": [{"index": 0, "delta": {"content": cut}, "finish_reason": "length"}]}]
    with ScriptedServer([chunks, sse_text("ok")]) as srv:
        agent = Agent(make_backend(f"openai:{srv.base_url}#m"), AgentConfig(root=repo, approval="yolo"))
        events = list(agent.run_turn("rewrite calc.py"))
    assert not any(isinstance(e, ToolCallProposed) for e in events)
    assert "return a - b" in (repo / "calc.py").read_text()
    error = srv.requests[1]["body"]["messages"][-1]["content"]
    assert "reached the token limit before this tool call was complete" in error
