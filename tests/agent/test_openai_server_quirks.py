"""The openai: backend against a local stub server that reproduces each defect seen against a
real llama.cpp server: small context + 400, finish_reason "length", in-stream errors,
a template that drops `tools`, the usage chunk, Ctrl+C while streaming, and a proxy."""
import json
import subprocess
import sys
import threading

import pytest

from clover_cli.agent.backends import Completion, make_backend
from clover_cli.agent.events import Notice, ToolFinished, TurnFinished

from .helpers import call, clover_in_process, make_repo
from .openai_server import ScriptedServer, sse_text, sse_tool_call
from .proxy import Proxy

USER = [{"role": "user", "content": "hi"}]


def _agent(srv, repo, **cfg):
    from clover_cli.agent import Agent, AgentConfig
    return Agent(make_backend(f"openai:{srv.base_url}#m", backoff=0.01), AgentConfig(root=repo, **cfg))


def _drain(backend, messages=USER, tools=(), **kw):
    items = list(backend.stream(messages, list(tools), **kw))
    assert isinstance(items[-1], Completion)
    return items[:-1], items[-1]


def test_context_window_comes_from_the_server_or_the_user():
    with ScriptedServer([], gets={"/v1/models": {"data": [{"id": "m", "max_model_len": 8192}]}}) as srv:
        assert make_backend(f"openai:{srv.base_url}#m").context_window == 8192
        assert make_backend(f"openai:{srv.base_url}#m", context_window=4096).context_window == 4096
    with ScriptedServer([], gets={"/props": {"default_generation_settings": {"n_ctx": 2048}}}) as srv:
        assert make_backend(f"openai:{srv.base_url}#m").context_window == 2048
    with ScriptedServer([]) as srv:  # the server says nothing: the documented default
        assert make_backend(f"openai:{srv.base_url}#m").context_window == 32768


def test_a_400_for_length_compacts_and_asks_again(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    too_long = {"status": 400, "body": {"error": {
        "message": "the request exceeds the available context size (8192 tokens), try increasing it"}}}
    responses = [sse_text("first answer " * 50), sse_text("second answer"),
                 too_long, sse_text("SUMMARY of earlier work"), sse_text("third answer")]
    with ScriptedServer(responses) as srv:
        agent = _agent(srv, repo)
        list(agent.run_turn("one"))
        list(agent.run_turn("two"))
        events = list(agent.run_turn("three"))
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("context window now 8,192 tokens" in n for n in notices), notices
    assert any(n.startswith("Compacted") for n in notices), notices
    assert events[-1].reason == "done" and events[-1].final_text == "third answer"
    assert agent.backend.context_window == 8192
    last = srv.requests[-1]["body"]["messages"]
    assert any("SUMMARY of earlier work" in (m.get("content") or "") for m in last)


def test_length_ends_the_turn_truncated_and_run_exits_1(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    cut = [{"choices": [{"index": 0, "delta": {"content": "The answer is"}, "finish_reason": "length"}]}]
    with ScriptedServer([cut]) as srv:
        events = list(_agent(srv, repo).run_turn("hi"))
    assert isinstance(events[-1], TurnFinished) and events[-1].reason == "truncated"
    with ScriptedServer([cut]) as srv:
        p = clover_in_process("run", "hi", "--root", str(repo), "--model", f"openai:{srv.base_url}#m")
    assert p.returncode == 1 and "stopped: truncated" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "Exception in thread" not in p.stderr


@pytest.mark.slow
def test_a_truncated_turn_exits_1_from_a_real_process(tmp_path):
    """The exit status and stderr of a real `clover run` (thread tracebacks at interpreter exit
    included), which the in-process case above cannot see."""
    repo = make_repo(tmp_path / "repo", git=False)
    cut = [{"choices": [{"index": 0, "delta": {"content": "The answer is"}, "finish_reason": "length"}]}]
    with ScriptedServer([cut]) as srv:
        p = subprocess.run([sys.executable, "-m", "clover_cli.cli", "run", "hi", "--root", str(repo),
                            "--model", f"openai:{srv.base_url}#m"], capture_output=True, text=True,
                           timeout=120)
    assert p.returncode == 1 and "stopped: truncated" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "Exception in thread" not in p.stderr


def test_a_native_call_cut_off_is_explained_as_cut_off(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    cut = sse_tool_call("c1", "write_file", ['{"path": "calc.py", "content": "def a'])[:-1]
    cut.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    with ScriptedServer([cut, sse_text("ok")]) as srv:
        events = list(_agent(srv, repo, approval="yolo").run_turn("rewrite"))
    assert not any(isinstance(e, ToolFinished) for e in events)
    told = srv.requests[1]["body"]["messages"][-1]["content"]
    assert "reached the token limit before this tool call was complete" in told
    assert "not a JSON object" not in told


def test_in_stream_error_before_output_is_retried():
    broken = {"sse": [{"error": {"message": "Failed to parse tool call", "code": 500}}], "done": False}
    with ScriptedServer([broken, sse_text("fine")]) as srv:
        _, comp = _drain(make_backend(f"openai:{srv.base_url}#m", backoff=0.01))
    assert comp.text == "fine" and len(srv.requests) == 2


def test_in_stream_error_after_output_becomes_feedback(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    half = {"sse": [{"choices": [{"index": 0, "delta": {"content": "Let me look"}}]},
                    {"error": {"message": "Failed to parse tool call"}}], "done": False}
    with ScriptedServer([half, sse_text("Done after all.")]) as srv:
        events = list(_agent(srv, repo).run_turn("hi"))
    assert events[-1].reason == "done" and events[-1].final_text == "Done after all."
    second = srv.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Let me look"}
    assert "Failed to parse tool call" in second[-1]["content"] and second[-1]["role"] == "user"


def test_a_template_that_drops_tools_gets_them_as_text(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    props = {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
             "default_generation_settings": {"n_ctx": 16384}}
    responses = [sse_text("Reading.\n", call("read_file", path="calc.py")), sse_text("It subtracts.")]
    with ScriptedServer(responses, gets={"/props": props}) as srv:
        agent = _agent(srv, repo)
        events = list(agent.run_turn("what does add do?"))
    notices = [e.message for e in events if isinstance(e, Notice) and "ignores native tool calls" in e.message]
    assert len(notices) == 1
    assert events[-1].reason == "done" and [e.name for e in events if isinstance(e, ToolFinished)] == ["read_file"]
    for req in srv.requests:
        assert "tools" not in req["body"]
        assert "<tool_call>" in req["body"]["messages"][0]["content"]  # the format, in the system text
    assert srv.requests[1]["body"]["messages"][-1]["role"] == "user"  # the result, as a user turn
    assert agent.backend.context_window == 16384


def test_a_server_refusing_tools_is_asked_again_without_them():
    refuse = {"status": 400, "body": {"error": {"message": "tools param requires --jinja flag"}}}
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    with ScriptedServer([refuse, sse_text("ok")]) as srv:
        items, comp = _drain(make_backend(f"openai:{srv.base_url}#m", backoff=0.01),
                             [{"role": "system", "content": "S"}, *USER], tools)
    assert comp.text == "ok" and "tools" in srv.requests[0]["body"] and "tools" not in srv.requests[1]["body"]
    assert any(isinstance(i, Notice) for i in items)


def test_usage_is_requested_and_used():
    chunks = sse_text("a", "b") + [{"choices": [], "usage": {"prompt_tokens": 321, "completion_tokens": 2}}]
    with ScriptedServer([chunks]) as srv:
        _, comp = _drain(make_backend(f"openai:{srv.base_url}#m"))
    assert srv.requests[0]["body"]["stream_options"] == {"include_usage": True}
    assert comp.stats["prompt_tokens"] == 321 and comp.stats["generated_tokens"] == 2


def test_cancel_mid_stream_leaves_no_thread_traceback(monkeypatch):
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args))
    slow = {"sse": sse_text(*["word "] * 40), "delay": 0.05, "chunked": True}
    before = set(threading.enumerate())
    for _ in range(3):
        with ScriptedServer([slow]) as srv:
            cancel = threading.Event()
            backend = make_backend(f"openai:{srv.base_url}#m")
            items = []
            for item in backend.stream(USER, [], cancel=cancel):
                items.append(item)
                if len(items) == 3:
                    cancel.set()
            backend.close()
        assert items[-1].finish_reason == "cancelled"
    for thread in set(threading.enumerate()) - before:  # the reader threads notice the closed responses
        thread.join(60)  # a hang guard; the server's handlers end within 2 s
    assert seen == []


def test_http_proxy_is_used(monkeypatch):
    with ScriptedServer([sse_text("via proxy")]) as srv, Proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        _, comp = _drain(make_backend(f"openai:{srv.base_url}#m", probe=False))
    assert comp.text == "via proxy"
    assert f"POST {srv.base_url}/chat/completions" in proxy.seen


def test_https_proxy_is_used(monkeypatch):
    """An https: server is reached through HTTPS_PROXY with CONNECT (the tunnel here leads to a
    plain-HTTP stub, so TLS then fails: the point is that the proxy was asked, as one line)."""
    from clover_cli.agent.backends import BackendError
    with ScriptedServer([sse_text("x")]) as srv, Proxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        port = srv.httpd.server_address[1]
        backend = make_backend(f"openai:https://127.0.0.1:{port}/v1#m", probe=False, retries=0)
        with pytest.raises(BackendError) as exc:
            _drain(backend)
    assert f"CONNECT 127.0.0.1:{port}" in proxy.seen
    assert "\n" not in str(exc.value)


def test_help_imports_neither_the_sdk_nor_torch():
    code = ("import json, sys, io, contextlib\nfrom clover_cli.cli import main\nsys.argv = ['clover', '--help']\n"
            "out = io.StringIO()\ntry:\n    with contextlib.redirect_stdout(out):\n        main()\n"
            "except SystemExit as e:\n    assert not e.code\nassert 'Usage' in out.getvalue()\n"
            "print(json.dumps([m for m in ('openai', 'torch', 'mcp', 'acp') if m in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == []


def test_what_props_says_about_tools():
    from clover_cli.agent.backends.openai_wire import template_drops_tools
    assert template_drops_tools({"chat_template": "{{ messages }}"})
    assert not template_drops_tools({"chat_template": "{% if tools %}{{ tools }}{% endif %}"})
    assert not template_drops_tools({"chat_template": "{{ messages }}", "chat_template_tool_use": "{{ tools }}"})
    assert template_drops_tools({"chat_template": "{{ tools }}", "chat_template_caps": {"supports_tools": False}})
    assert not template_drops_tools({}) and not template_drops_tools({"chat_template": ""})


@pytest.mark.slow
def test_ctrl_c_in_clover_run_leaves_no_thread_traceback(tmp_path):
    import signal
    repo = make_repo(tmp_path / "repo", git=False)
    slow = {"sse": sse_text(*[f"word{i} " for i in range(200)]), "delay": 0.05, "chunked": True}
    with ScriptedServer([slow]) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", "run", "hi", "--root", str(repo),
                                 "--model", f"openai:{srv.base_url}#m"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        first = proc.stdout.read(20)  # the answer is streaming
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert first.startswith("word0") and proc.returncode == 1, err
    assert "stopped: cancelled" in err
    assert "Exception in thread" not in err and "Traceback" not in err, err


def test_length_errors_of_each_server_are_recognised():
    from clover_cli.agent.backends.openai_wire import is_context_overflow, refuses_tools, window_in_message
    vllm = ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
            "(7000 in the messages, 2000 in the completion). Please reduce the length of the messages.")
    llama = "the request exceeds the available context size (4096 tokens), try increasing it"
    openai_style = "This model's maximum context length is 128000 tokens (context_length_exceeded)"
    assert is_context_overflow(400, vllm) and window_in_message(vllm) == 8192
    assert is_context_overflow(400, llama) and window_in_message(llama) == 4096
    assert is_context_overflow(400, openai_style) and window_in_message(openai_style) == 128000
    assert not is_context_overflow(400, "model not found") and not is_context_overflow(500, llama)
    assert refuses_tools(400, "tools param requires --jinja flag")
    assert refuses_tools(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    assert not refuses_tools(400, "model not found")


def test_tool_names_outside_openais_pattern_go_over_the_wire_mapped_and_come_back():
    """MCP tools are named `server.tool`; OpenAI's API takes only ^[a-zA-Z0-9_-]{1,64}$ and
    answers 400. The request carries safe, distinct names (schemas and history alike), the
    server's call comes back under the tool's own name, and a server that repeats the function
    name in every streamed chunk (llama-cpp-python) gets it once."""
    import re

    from clover_cli.agent.backends.openai_wire import wire_names

    def schema(name):
        return {"type": "function", "function": {"name": name, "description": "d",
                                                  "parameters": {"type": "object", "properties": {}}}}

    tools = [schema("time.get_current_time"), schema("time_get_current_time"), schema("grep"),
             schema("git/status:" + "x" * 80)]
    history = USER + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "time.get_current_time", "arguments": {}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"}]
    wire = wire_names([t["function"]["name"] for t in tools])
    repeated = sse_tool_call("c2", wire["time.get_current_time"], ['{"tz"', ': "UTC"}'])
    for chunk in repeated[1:-1]:  # the name again in every argument chunk
        chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = wire["time.get_current_time"]
    with ScriptedServer([repeated]) as srv:
        _, done = _drain(make_backend(f"openai:{srv.base_url}#m"), history, tools)
        body = srv.requests[-1]["body"]
    sent = [t["function"]["name"] for t in body["tools"]]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in sent) and len(set(sent)) == 4
    assert sent[1] == "time_get_current_time" and sent[2] == "grep"  # valid names are kept as they are
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == sent[0]
    assert [(c.name, c.arguments) for c in done.tool_calls] == [("time.get_current_time", '{"tz": "UTC"}')]
