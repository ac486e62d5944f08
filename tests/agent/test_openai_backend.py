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
    assert req["body"]["tool_choice"] == "auto"  # tools offered: the model may call them


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
    assert sent[1]["content"] == ""  # the markup became native tool_calls; "" not null (llama-cpp-python)
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
    # the server stalls 60 s: only the 0.3 s timeout can end the request sooner (its message says
    # which ended it; the 30 s bound is a hang guard, 100x the healthy time)
    with ScriptedServer([{"sleep": 60}]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", timeout=0.3, retries=0)
        t0 = time.monotonic()
        with pytest.raises(BackendError, match="did not answer within 0.3 s"):
            drain(b, [{"role": "user", "content": "hi"}])
        assert time.monotonic() - t0 < 30


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


def _error_of(response, **opts):
    with ScriptedServer([response]) as srv:
        b = make_backend(f"openai:{srv.base_url}#m", retries=0, **opts)
        with pytest.raises(BackendError) as exc:
            drain(b, [{"role": "user", "content": "hi"}])
    msg = str(exc.value)
    assert "\n" not in msg and f"{srv.base_url}/chat/completions" in msg, msg
    return msg


def test_html_page_is_an_error_naming_the_url():
    msg = _error_of({"raw": b"<html><body>Welcome to nginx</body></html>", "type": "text/html"})
    assert msg.startswith("openai: http://127.0.0.1:") and "answered 200 text/html, not an event stream" in msg
    assert "ends in /v1" in msg and "Welcome to nginx" in msg


def test_garbage_events_and_wrong_bodies_are_errors():
    assert "not a JSON object: '{not json}'" in _error_of({"sse": ["{not json}"]})
    assert "not a JSON object" in _error_of({"sse": ["[1, 2]"]})
    assert "answered 200 text/plain" in _error_of({"raw": b"hello there", "type": "text/plain"})
    assert "without a Content-Type" in _error_of({"raw": b"<html>x</html>"})
    assert "not JSON" in _error_of({"raw": b"{oops", "type": "application/json"})
    assert "not a chat completion" in _error_of({"raw": b'{"id": "x"}', "type": "application/json"})
    assert "reported: bad model" in _error_of({"raw": b'{"error": {"message": "bad model"}}',
                                                "type": "application/json"})


def test_stream_cut_off_without_done_or_finish_reason_is_an_error():
    chunks = [{"choices": [{"index": 0, "delta": {"content": "half an ans"}}]}]
    msg = _error_of({"sse": chunks, "done": False})
    assert "ended before the answer was complete" in msg
    assert "ended before" in _error_of({"sse": [], "done": False})
    # a finish_reason without [DONE], or [DONE] without a finish_reason, is a complete answer
    for resp in ({"sse": sse_text("a", "b"), "done": False}, {"sse": chunks, "done": True}):
        with ScriptedServer([resp]) as srv:
            _, comp = drain(make_backend(f"openai:{srv.base_url}#m", retries=0), [{"role": "user", "content": "x"}])
        assert comp.text in ("ab", "half an ans") and comp.finish_reason == "stop"


def test_plain_json_completion_is_accepted():
    body = {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "Reading <think>hm</think>it.",
                        "tool_calls": [{"id": "call_1", "type": "function",
                                        "function": {"name": "read_file", "arguments": "{\"path\": \"a.py\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9}}
    for ctype in ("application/json", None):  # some servers send no Content-Type
        with ScriptedServer([{"raw": json.dumps(body).encode(), "type": ctype}]) as srv:
            blocks, comp = drain(make_backend(f"openai:{srv.base_url}#m"), [{"role": "user", "content": "x"}])
        assert comp.text == "Reading <think>hm</think>it." and comp.finish_reason == "tool_calls"
        assert [(c.id, c.name, json.loads(c.arguments)) for c in comp.tool_calls] == [("call_1", "read_file", {"path": "a.py"})]
        assert "".join(b.text for b in blocks if not b.thinking) == "Reading it."
        assert comp.stats["generated_tokens"] == 9 and comp.stats["prompt_tokens"] == 12


def test_cancel_while_a_plain_json_answer_is_awaited():
    import http.server

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"choices": [')
            self.wfile.flush()
            time.sleep(60)  # only the cancel can end the read before this

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        b = make_backend(f"openai:http://127.0.0.1:{srv.server_address[1]}/v1#m")
        t0 = time.monotonic()
        _, comp = drain(b, [{"role": "user", "content": "x"}], cancel=cancel)
        assert comp.finish_reason == "cancelled" and time.monotonic() - t0 < 30  # hang guard: the server holds 60 s
    finally:
        srv.shutdown()
        srv.server_close()
