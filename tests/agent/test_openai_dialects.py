"""The openai: backend against each OpenAI-compatible server's dialect (docs/agent.md, "Server
dialects"): a recorded stream per server (tests/agent/streams/<server>.sse, each opening with
where its shape comes from) replayed byte for byte by the stub server, one error answer per server
(<server>.error.http), and what each server does with `tools`."""
import json
from pathlib import Path

import pytest

from clover_cli.agent.backends import BackendError, Completion, make_backend
from clover_cli.agent.events import BlockText, Notice, ToolFinished

from .helpers import call, make_repo
from .openai_server import ScriptedServer, sse_text

STREAMS = Path(__file__).with_name("streams")
USER = [{"role": "user", "content": "what does add do?"}]
TOOLS = [{"type": "function", "function": {"name": n, "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}
         for n in ("read_file", "grep")]


def replay(server: str) -> dict:
    """The recorded stream as the stub's answer, byte for byte (comments and line ends kept)."""
    return {"raw": (STREAMS / f"{server}.sse").read_bytes(), "type": "text/event-stream"}


def error_answer(server: str) -> dict:
    """`<server>.error.http`: '#' comment lines, a status line, headers, a blank line, the body."""
    text = (STREAMS / f"{server}.error.http").read_text()
    lines = [ln for ln in text.split("\n") if not ln.startswith("#")]
    blank = lines.index("")
    status = int(lines[0].split()[1])
    headers = dict(ln.split(": ", 1) for ln in lines[1:blank])
    return {"raw": "\n".join(lines[blank + 1:]).encode(), "type": headers["Content-Type"], "status": status}


def _drain(backend, messages=USER, tools=TOOLS):
    items = list(backend.stream(messages, list(tools)))
    assert isinstance(items[-1], Completion)
    return items[:-1], items[-1]


# What each recorded stream says: (reasoning, text, [(id, name, arguments)], finish_reason,
# (prompt_tokens, generated_tokens) when the server reports usage in the stream).
EXPECTED = {
    "vllm": ("Both files are needed.", "Reading both files.",
             [("chatcmpl-tool-9d2f6b1a", "read_file", {"path": "calc.py"}),
              ("chatcmpl-tool-4e7a0c33", "read_file", {"path": "README.md"})], "tool_calls", (812, 58)),
    "sglang": ("The add function is in calc.py; read it before answering.",
               "Let me look at calc.py to see what add does.",
               [("call_3b9d27e1f0a84c6d95e2b7a1", "read_file", {"path": "calc.py"})], "tool_calls", (733, 64)),
    "llama-server": ("The grep tool finds the definition.", "",
                     [("kHc9Bq1LrX0sVt5pNe3mYw8aDz6uGf2J", "grep", {"pattern": "def add"})], "tool_calls",
                     (655, 21)),
    "ollama": ("I need calc.py and the tests.", "",
               [("call_k3v9x2qa", "read_file", {"path": "calc.py"}),
                ("call_7mw1c0ps", "grep", {"pattern": "def test_"})], "tool_calls", (590, 47)),
    "lm-studio": ("", "I'll check the file.", [("365174485", "read_file", {"path": "calc.py"})], "tool_calls", None),
    "llama-cpp-python": ("", "", [("call__0_read_file_cmpl-7f3e2b1a-5c6d-4e8f-9a0b-1c2d3e4f5a6b", "read_file",
                                   {"path": "calc.py"})], "tool_calls", None),
}


@pytest.mark.parametrize("server", sorted(EXPECTED))
def test_each_servers_recorded_stream_gives_its_text_and_calls_exactly(server):
    reasoning, text, calls, finish, usage = EXPECTED[server]
    with ScriptedServer([replay(server)]) as srv:
        items, done = _drain(make_backend(f"openai:{srv.base_url}#m", probe=False, retries=0))
    shown = [i for i in items if isinstance(i, BlockText)]
    assert "".join(i.text for i in shown if i.thinking) == reasoning
    assert "".join(i.text for i in shown if not i.thinking) == text == done.text
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.tool_calls] == calls
    assert done.finish_reason == finish
    if usage:
        assert (done.stats["prompt_tokens"], done.stats["generated_tokens"]) == usage


# The one line each server's error answer becomes, and how many requests it took (an error
# inside a stream before any output is retried like a 5xx; the rest are final).
ERRORS = {
    "vllm": ("returned HTTP 404: The model `m` does not exist.", 1),
    "sglang": ("returned HTTP 400: Messages cannot be empty.", 1),
    "llama-server": ('reported in the stream: Failed to parse input at pos 12: <tool_call>{"name": "grep"', 3),
    "ollama": ('returned HTTP 404: model "qwen3:8b" not found, try pulling it first', 1),
    "lm-studio": ("reported: Unexpected endpoint or method. (POST /chat/completions). Returning 200 anyway", 1),
    "llama-cpp-python": ("returned HTTP 500: invalid request: messages.1.content: Input should be a valid "
                         "string (got null) (7 validation errors, the rest about other message kinds)", 1),
}


@pytest.mark.parametrize("server", sorted(ERRORS))
def test_each_servers_error_answer_is_one_line_naming_the_cause(server):
    expected, requests = ERRORS[server]
    with ScriptedServer([error_answer(server)] * 3) as srv:
        backend = make_backend(f"openai:{srv.base_url}#m", probe=False, retries=2, backoff=0.01)
        with pytest.raises(BackendError) as exc:
            _drain(backend)
    message = str(exc.value)
    assert "\n" not in message and f"{srv.base_url}" in message
    assert message.endswith(expected), message
    assert len(srv.requests) == requests


def _agent(srv, repo, **opts):
    from clover_cli.agent import Agent, AgentConfig
    return Agent(make_backend(f"openai:{srv.base_url}#m", backoff=0.01, **opts), AgentConfig(root=repo))


def _assistant_content_is_a_string(body: dict) -> dict | None:
    """llama-cpp-python's check of an assistant message (llama_types.py: `content: NotRequired[str]`),
    refused with its recorded HTTP 500."""
    for m in body.get("messages") or []:
        if m.get("role") == "assistant" and "content" in m and not isinstance(m["content"], str):
            return error_answer("llama-cpp-python")
    return None


def test_the_request_after_a_native_call_is_one_llama_cpp_python_accepts(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    with ScriptedServer([replay("llama-cpp-python"), sse_text("add subtracts.")],
                        check=_assistant_content_is_a_string) as srv:
        events = list(_agent(srv, repo, probe=False).run_turn("what does add do?"))
    assert events[-1].reason == "done" and events[-1].final_text == "add subtracts."
    assert [(e.name, e.ok) for e in events if isinstance(e, ToolFinished)] == [("read_file", True)]
    sent = srv.requests[1]["body"]["messages"][-2]
    assert sent["content"] == "" and sent["tool_calls"][0]["function"]["name"] == "read_file"


def test_llama_cpp_python_is_told_apart_and_gets_the_tools_as_text(tmp_path):
    """/props is a 404 there, so only its /v1/models (`owned_by: "me"`, server/app.py) tells it
    apart; whether its chat format renders `tools` it cannot say, so they go as text, once noted."""
    repo = make_repo(tmp_path / "repo", git=False)
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me", "permissions": []}]}
    responses = [sse_text("Reading.\n", call("read_file", path="calc.py")), sse_text("It subtracts.")]
    with ScriptedServer(responses, gets={"/v1/models": models}) as srv:
        agent = _agent(srv, repo)
        events = list(agent.run_turn("what does add do?"))
        assert agent.backend.dialect == "llama-cpp-python"
    notices = [e.message for e in events if isinstance(e, Notice) and "native tool calls" in e.message]
    assert len(notices) == 1 and "llama-cpp-python" in notices[0] and "\n" not in notices[0]
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["read_file"]
    for req in srv.requests:
        assert "tools" not in req["body"] and "tool_choice" not in req["body"]
        assert "<tool_call>" in req["body"]["messages"][0]["content"]


@pytest.mark.parametrize("owned_by, dialect", [("vllm", "vLLM"), ("sglang", "SGLang"), ("llamacpp", "llama-server"),
                                               ("organization_owner", "LM Studio"), ("library", "Ollama")])
def test_other_servers_are_told_apart_and_keep_native_tools(owned_by, dialect):
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owned_by}]}
    with ScriptedServer([sse_text("ok")], gets={"/v1/models": models}) as srv:
        backend = make_backend(f"openai:{srv.base_url}#m")
        items, done = _drain(backend)
    assert backend.dialect == dialect and done.text == "ok"
    assert not any(isinstance(i, Notice) for i in items)
    assert srv.requests[0]["body"]["tools"] and srv.requests[0]["body"]["tool_choice"] == "auto"


@pytest.mark.parametrize("status, message", [
    # llama-server without --jinja: a std::runtime_error, so HTTP 500 (tools/server)
    (500, "tools param requires --jinja flag"),
    # vLLM without --enable-auto-tool-choice (entrypoints/openai chat serving)
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    # Ollama, a model whose template has no tools (server/images.go errCapabilities)
    (400, "registry.ollama.ai/library/gemma2:2b does not support tools"),
])
def test_a_server_refusing_tools_gets_them_as_text_at_once(status, message):
    refusal = {"status": status, "body": {"error": {"message": message, "type": "server_error", "code": status}}}
    with ScriptedServer([refusal, sse_text("ok")]) as srv:
        items, done = _drain(make_backend(f"openai:{srv.base_url}#m", probe=False, backoff=0.01),
                             [{"role": "system", "content": "S"}, *USER])
    assert done.text == "ok" and len(srv.requests) == 2
    assert "tools" in srv.requests[0]["body"] and "tools" not in srv.requests[1]["body"]
    assert sum(isinstance(i, Notice) for i in items) == 1


def test_a_server_refusing_tool_choice_is_asked_again_with_tools_but_without_it():
    refusal = {"status": 400, "body": {"error": {"message": "Unsupported param: tool_choice", "code": 400}}}
    with ScriptedServer([refusal, sse_text("ok"), sse_text("again")]) as srv:
        backend = make_backend(f"openai:{srv.base_url}#m", probe=False, backoff=0.01)
        items, done = _drain(backend)
        _, again = _drain(backend)
    assert done.text == "ok" and again.text == "again"
    assert srv.requests[0]["body"]["tool_choice"] == "auto"
    for req in srv.requests[1:]:
        assert "tool_choice" not in req["body"] and req["body"]["tools"]
    assert [i.message for i in items if isinstance(i, Notice)] == [
        f"openai: {srv.base_url} refused `tool_choice` (HTTP 400); asking again without it"]


@pytest.mark.parametrize("lines", [
    [b'event: error\ndata: {"message": "engine died", "code": 500}'],  # a named SSE event
    [b'data: {"object": "error", "message": "engine died", "type": "InternalServerError", "code": 500}'],
    [b'error: {"code": 500, "message": "engine died", "type": "server_error"}'],  # llama-server
])
def test_an_error_event_in_any_form_is_an_error_not_an_empty_answer(lines):
    body = b"\n\n".join([b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}', *lines,
                         b"data: [DONE]"]) + b"\n\n"
    with ScriptedServer([{"raw": body, "type": "text/event-stream"}]) as srv:
        with pytest.raises(BackendError, match="reported in the stream: engine died$"):
            _drain(make_backend(f"openai:{srv.base_url}#m", probe=False, retries=0))


def test_calls_ending_in_finish_reason_stop_are_run(tmp_path):
    """Ollama relabels its "stop" as "tool_calls" once a call was sent (openai/openai.go
    FinishChunk); a server that does not still gets its calls run: the calls are what counts."""
    repo = make_repo(tmp_path / "repo", git=False)
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"calc.py"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    with ScriptedServer([chunks, sse_text("Read it.")]) as srv:
        events = list(_agent(srv, repo, probe=False).run_turn("read calc.py"))
    assert [(e.name, e.ok) for e in events if isinstance(e, ToolFinished)] == [("read_file", True)]
    assert events[-1].final_text == "Read it." and srv.requests[1]["body"]["messages"][-1]["role"] == "tool"


def test_tool_call_deltas_without_index_are_placed_by_their_id():
    """No documented server omits `index`, but the OpenAI schema lets a client meet one: a new id
    starts a call, a fragment without one continues the last, a repeated id finds its call."""
    from clover_cli.agent.backends.openai_stream import Assembler

    def delta(*calls):
        return {"choices": [{"index": 0, "delta": {"tool_calls": list(calls)}}]}

    acc = Assembler()
    for event in (delta({"id": "a", "function": {"name": "grep", "arguments": '{"pat'}}),
                  delta({"function": {"arguments": 'tern": "x"}'}}),
                  delta({"id": "b", "function": {"name": "read_file", "arguments": ""}}),
                  delta({"id": "b", "function": {"arguments": '{"path": "y"}'}}),
                  delta({"id": "c", "function": {"name": "ls", "arguments": "{}"}},
                        {"id": "d", "function": {"name": "ls", "arguments": {"path": "z"}}})):
        list(acc.feed(event))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in acc.native()] == [
        ("a", "grep", {"pattern": "x"}), ("b", "read_file", {"path": "y"}), ("c", "ls", {}), ("d", "ls", {"path": "z"})]


@pytest.mark.parametrize("prompt_tokens, dropped", [(300, True), (1900, False)])
def test_a_server_whose_prompt_count_cannot_hold_the_tools_gets_them_as_text(tmp_path, prompt_tokens, dropped):
    """A server its answers do not name, whose chat template drops `tools` without a word: its
    own usage.prompt_tokens for the first request is fewer than one token per 8 characters sent
    (here ~7,000 characters of system prompt and tool schemas), so later requests carry the tools
    as text, after one note; a count that can hold them changes nothing."""
    repo = make_repo(tmp_path / "repo", git=False)
    first = sse_text("I cannot see any tools.") + [{"choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                                             "completion_tokens": 6}}]
    with ScriptedServer([first, sse_text("second")]) as srv:
        agent = _agent(srv, repo)
        list(agent.run_turn("one"))
        events = list(agent.run_turn("two"))
    notes = [e.message for e in events if isinstance(e, Notice) and "native tool calls" in e.message]
    if dropped:
        assert len(notes) == 1 and f"counted the prompt at {prompt_tokens} tokens" in notes[0]
        assert "tools" in srv.requests[0]["body"] and "tools" not in srv.requests[1]["body"]
    else:
        assert notes == [] and srv.requests[1]["body"]["tools"] == agent.tools


def test_ollamas_chunks_name_it_so_its_cached_prompt_count_is_not_taken_for_dropped_tools():
    """Ollama counts only the prompt tokens it did not have cached (prompt_eval_count), so a small
    count says nothing there; its chunks carry system_fingerprint "fp_ollama" (openai/openai.go)."""
    chunks = [dict(c, system_fingerprint="fp_ollama") for c in sse_text("ok")]
    chunks.append({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 1},
                   "system_fingerprint": "fp_ollama"})
    with ScriptedServer([chunks, sse_text("again")]) as srv:
        backend = make_backend(f"openai:{srv.base_url}#m", probe=False)
        _drain(backend)
        items, _ = _drain(backend)
    assert backend.dialect == "Ollama" and not any(isinstance(i, Notice) for i in items)
    assert srv.requests[1]["body"]["tools"]


def test_error_bodies_of_every_shape_give_their_message_in_one_line():
    from clover_cli.agent.backends.openai_wire import error_detail
    fastapi_422 = {"detail": [  # FastAPI's own RequestValidationError answer
        {"type": "literal_error", "loc": ["body", "messages", 0, "role"], "msg": "Input should be 'system'",
         "input": "assistent"},
        {"type": "int_parsing", "loc": ["body", "max_tokens"], "msg": "Input should be a valid integer",
         "input": "many"}]}
    pydantic_text = ("1 validation error for ChatCompletionRequest\nmessages.1.content\n  Input should be a valid "
                     "string [type=string_type, input_value=None, input_type=NoneType]\n    For further "
                     "information visit https://errors.pydantic.dev/2.11/v/string_type")
    assert error_detail(json.dumps(fastapi_422)) == (  # a role no kind takes is the cause itself
        "invalid request: messages.0.role: Input should be 'system' (got \"assistent\"); "
        'max_tokens: Input should be a valid integer (got "many")')
    assert error_detail(json.dumps({"error": {"message": pydantic_text}})) == (
        "invalid request: messages.1.content: Input should be a valid string (got null)")
    assert error_detail(json.dumps({"detail": "Invalid API Key"})) == "Invalid API Key"
    assert error_detail("upstream connect error\n or disconnect") == "upstream connect error or disconnect"
    assert error_detail(json.dumps({"error": "model not loaded"})) == "model not loaded"
    assert error_detail(json.dumps({"object": "error", "message": "bad", "code": 400})) == "bad"


def test_a_validation_list_is_read_per_message_kind():
    """llama-cpp-python's union of message kinds: a role no kind takes is the cause itself; a
    known role that one kind took leaves that kind's complaint as the cause."""
    from clover_cli.agent.backends.openai_errors import summarise

    def refused(kind, role):
        return {"type": "literal_error", "loc": ("body", "messages", 0, "typed-dict", "role"),
                "msg": f"Input should be '{kind}'", "input": role}

    def missing(field):
        return {"type": "missing", "loc": ("body", "messages", 0, "typed-dict", field), "msg": "Field required"}

    kinds = ("system", "user", "assistant", "tool", "function")
    assert summarise([refused(k, "bot") for k in kinds] + [missing("tool_call_id")]) == (
        "invalid request: messages.0.role: Input should be one of 'system', 'user', 'assistant', 'tool', "
        "'function' (got \"bot\") (6 validation errors, the rest about other message kinds)")
    assert summarise([refused(k, "tool") for k in kinds if k != "tool"] + [missing("tool_call_id")]) == (
        "invalid request: messages.0.tool_call_id: Field required "
        "(5 validation errors, the rest about other message kinds)")
