"""The openai: backend against a stub that answers as a real vLLM server did (issue 49, "Real
server"): its context-length errors and /tokenize, a connection dropped mid-answer, a chat
template that requires alternating roles, what it says about itself, and its stream's shapes."""
import json
from pathlib import Path

from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import TurnFinished

from .helpers import clover_in_process, make_repo
from .openai_server import ScriptedServer, sse_text

STREAMS = Path(__file__).with_name("streams")
VLLM_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 8192}]}


def replay(name: str) -> dict:
    """A recorded stream as the stub's answer, byte for byte."""
    return {"raw": (STREAMS / name).read_bytes(), "type": "text/event-stream"}


def alternate_or_400(body: dict) -> dict | None:
    """A chat template that raises on two messages of one role in a row (Gemma's, Mistral's), as
    vLLM reports it."""
    roles = [m["role"] for m in body["messages"] if m["role"] in ("user", "assistant")]
    if any(a == b for a, b in zip(roles, roles[1:])):
        return {"status": 400, "body": {"error": {
            "message": "Conversation roles must alternate user/assistant/user/assistant/...",
            "type": "BadRequestError", "param": None, "code": 400}}}
    return None


def test_a_failed_turn_resumed_sends_alternating_roles(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    failed = {"status": 400, "body": {"error": {"message": "something else went wrong"}}}
    with ScriptedServer([failed, sse_text("fine")], check=alternate_or_400) as srv:
        spec = f"openai:{srv.base_url}#m"
        first = clover_in_process("run", "one", "--root", str(repo), "--model", spec)
        second = clover_in_process("run", "two", "--continue", "--root", str(repo), "--model", spec)
    assert first.returncode == 1 and second.returncode == 0, second.stderr
    sent = srv.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "one" in sent[1]["content"] and sent[1]["content"].endswith("two")


class DenseVllm:
    """vLLM's count of a prompt of dense text (random words with digits: 2 characters a token,
    4 tokens of template a message, 3 characters a token of tool schema), its length check with
    its own wording, and its /tokenize."""

    def __init__(self, window: int = 8192, fixed: int = 0) -> None:
        self.window, self.fixed = window, fixed  # fixed: tokens every prompt takes besides its text

    def count(self, messages: list[dict], tools: list | None = None) -> int:
        text = sum(-(-len((m.get("content") or "") + json.dumps(m.get("tool_calls") or "")) // 2) + 4
                   for m in messages)
        return self.fixed + text + (-(-len(json.dumps(tools)) // 3) if tools else 0)

    def check(self, body: dict) -> dict | None:
        prompt, room = self.count(body["messages"], body.get("tools")), body["max_tokens"]
        if prompt + room <= self.window:
            return None
        return {"status": 400, "body": {"error": {
            "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                       f"{prompt + room} tokens ({prompt} in the messages, {room} in the completion). Please "
                       "reduce the length of the messages or completion.",
            "type": "BadRequestError", "param": None, "code": 400}}}

    def tokenize(self, body: dict) -> tuple[int, dict]:
        n = self.count(body["messages"]) if "messages" in body else -(-len(body["prompt"]) // 3)
        return 200, {"count": n, "max_model_len": self.window, "tokens": [11] * n, "token_strs": None}


DENSE = " ".join(f"w{i % 97}q{i * 7919 % 100000}" for i in range(6000))[:48_000]


def _agent(srv, repo, **cfg):
    from clover_cli.agent import Agent, AgentConfig
    return Agent(make_backend(f"openai:{srv.base_url}#m", backoff=0.01), AgentConfig(root=repo, **cfg))


def _no_repeats(srv) -> None:
    bodies = [json.dumps(r["body"], sort_keys=True) for r in srv.requests]
    assert all(a != b for a, b in zip(bodies, bodies[1:])), "the same request was sent twice in a row"


def test_a_dense_prompt_is_cut_by_the_servers_own_numbers_never_resent(tmp_path):
    """No /tokenize (a proxy in front of vLLM): the 400's numbers teach the ratio at once."""
    repo = make_repo(tmp_path / "repo", git=False)
    vllm = DenseVllm()
    with ScriptedServer([sse_text("read it")], gets={"/v1/models": VLLM_MODELS}, check=vllm.check) as srv:
        events = list(_agent(srv, repo).run_turn(DENSE))
    _no_repeats(srv)
    assert events[-1].reason == "done", [getattr(e, "message", e) for e in events]
    last = srv.requests[-1]["body"]
    assert vllm.count(last["messages"], last.get("tools")) + last["max_tokens"] <= 8192
    assert len(srv.requests) == 2  # one refusal, then a request cut by what it said


def test_a_server_with_tokenize_counts_the_prompt_so_it_fits_the_first_time(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    vllm = DenseVllm()
    with ScriptedServer([sse_text("read it")], gets={"/v1/models": VLLM_MODELS}, check=vllm.check,
                        posts={"/tokenize": vllm.tokenize}) as srv:
        events = list(_agent(srv, repo).run_turn(DENSE))
    assert events[-1].reason == "done"
    assert len(srv.requests) == 1 and srv.other_posts[0]["body"]["model"] == "m"
    assert "/props" not in srv.get_paths  # /v1/models said vLLM, which has no /props


def test_only_the_answers_room_too_large_is_asked_again_at_once_with_less(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    vllm = DenseVllm()
    with ScriptedServer([sse_text("ok")], gets={"/v1/models": VLLM_MODELS}, check=vllm.check) as srv:
        events = list(_agent(srv, repo, max_new_tokens=8000).run_turn(DENSE[:9000]))
    assert events[-1].reason == "done"
    assert not any("ompact" in getattr(e, "message", "") for e in events)  # nothing to compact for it
    first, second = (r["body"] for r in srv.requests)
    prompt = vllm.count(second["messages"], second.get("tools"))
    assert first["messages"] == second["messages"] and second["max_tokens"] == 8192 - prompt


def test_nothing_left_to_cut_ends_the_turn_with_one_line_never_the_same_request(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    vllm = DenseVllm(fixed=9000)  # a template (or tools) larger than the window itself
    with ScriptedServer([sse_text("never")], gets={"/v1/models": VLLM_MODELS}, check=vllm.check) as srv:
        events = list(_agent(srv, repo).run_turn("hi"))
    _no_repeats(srv)
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.reason == "error"
    assert "\n" not in end.final_text and "context" in end.final_text, end.final_text
    assert len(srv.requests) <= 4


def _error(srv_url: str, responses=None, **kw) -> str:
    from clover_cli.agent.backends import BackendError
    try:
        list(make_backend(f"openai:{srv_url}#m", retries=0, **kw).stream([{"role": "user", "content": "x"}], []))
    except BackendError as e:
        return str(e)
    raise AssertionError("no error")


def test_what_vllm_is_asked_and_the_hints_on_a_wrong_url_or_key(monkeypatch):
    with ScriptedServer([sse_text("a")], gets={"/v1/models": VLLM_MODELS}) as srv:
        list(make_backend(f"openai:{srv.base_url}#m").stream([{"role": "user", "content": "x"}], []))
    assert srv.get_paths == ["/v1/models"]  # no /props: vLLM has none
    assert srv.requests[0]["body"]["temperature"] == 0  # greedy, as in-process, unless configured
    not_found = {"status": 404, "body": {"detail": "Not Found"}}  # FastAPI's answer for an unknown path
    with ScriptedServer([not_found, not_found]) as srv:
        root = srv.base_url[: -len("/v1")]
        assert f"HTTP 404: Not Found (did you mean {root}/v1?)" in _error(root)
        assert "did you mean" not in _error(srv.base_url)
    unauthorized = {"status": 401, "body": {"error": {"message": "Unauthorized", "code": 401}}}
    monkeypatch.setenv("MY_KEY", "k")
    with ScriptedServer([unauthorized, unauthorized]) as srv:
        plain, named = _error(srv.base_url), _error(srv.base_url, api_key_env="MY_KEY")
    assert "OPENAI_API_KEY" in plain and "--api-key-env" in plain, plain
    assert "MY_KEY" in named and "--api-key-env" in named, named


def test_a_connection_dropped_mid_answer_keeps_the_answer_so_far(tmp_path):
    """The server dies mid-stream (chunked framing never ended, as uvicorn's stream when its
    process is killed): the partial answer is kept, counted and marked as cut off, and the error
    is reported; likewise a stream that just stops without its end."""
    from clover_cli.agent.events import AgentError
    from clover_cli.agent.session import sessions_dir

    pieces = ["The fix ", "is in calc", ".py: add ", "returns a - b"]
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    for dropped in ({"sse": chunks, "done": False, "chunked": True, "drop": True},
                    {"sse": chunks, "done": False}):
        repo = make_repo(tmp_path / f"repo{len(dropped)}", git=False)
        with ScriptedServer([dropped]) as srv:
            agent = _agent(srv, repo)
            events = list(agent.run_turn("why?"))
        end = events[-1]
        assert end.reason == "error" and end.final_text == "".join(pieces)
        assert end.stats["generated_tokens"] > 0
        assert any(isinstance(e, AgentError) and "kept" in e.message for e in events)
        logged = [json.loads(line) for f in sessions_dir(repo).glob("*.jsonl") for line in f.read_text().splitlines()]
        kept = [r["message"] for r in logged if r.get("type") == "message" and r["message"]["role"] == "assistant"]
        assert kept == [{"role": "assistant", "content": "".join(pieces), "cut_off": True}]


def test_vllm_0_32s_stream_shapes_give_the_text_the_call_and_the_usage(tmp_path):
    """tests/agent/streams/vllm-0.32.sse: null prompt_token_ids/prompt_text/token_ids, "content":
    null beside tool_calls, arguments in token-sized pieces, the finishing "delta": {} with
    stop_reason, system_fingerprint in the usage chunk."""
    from clover_cli.agent.backends import Completion
    from clover_cli.agent.events import ToolFinished

    with ScriptedServer([replay("vllm-0.32.sse")]) as srv:
        items = list(make_backend(f"openai:{srv.base_url}#m", probe=False).stream(
            [{"role": "user", "content": "x"}], []))
    done = items[-1]
    assert isinstance(done, Completion) and done.text == "I'll read the file."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.tool_calls] == \
        [("chatcmpl-tool-a41f0e2b9c7d4f18", "read_file", {"path": "calc.py"})]
    assert done.finish_reason == "tool_calls"
    assert (done.stats["prompt_tokens"], done.stats["generated_tokens"]) == (1342, 21)
    repo = make_repo(tmp_path / "repo", git=False)
    with ScriptedServer([replay("vllm-0.32.sse"), sse_text("It subtracts.")]) as srv:
        events = list(_agent(srv, repo).run_turn("what does add do?"))
    ran = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.name, e.ok) for e in ran] == [("read_file", True)] and "return a - b" in ran[0].output
    assert events[-1].reason == "done"


def test_vllm_0_32s_length_finish_keeps_the_last_token(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    with ScriptedServer([replay("vllm-0.32-length.sse")]) as srv:
        p = clover_in_process("run", "what does add do?", "--root", str(repo), "--model", f"openai:{srv.base_url}#m")
    assert p.stdout.strip() == "The add function returns a - b"
    assert p.returncode == 1 and "stopped: truncated\n" in p.stderr


def test_each_servers_length_error_gives_its_numbers():
    from clover_cli.agent.backends.openai_count import overflow_numbers as said
    from clover_cli.agent.backends.openai_wire import is_context_overflow

    cases = {  # each server's own wording -> (window, prompt, completion)
        "This model's maximum context length is 8192 tokens. However, you requested 8193 tokens (7169 in the "
        "messages, 1024 in the completion). Please reduce the length of the messages or completion.":
            (8192, 7169, 1024),
        "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. "
        "Please reduce the length of the input messages.": (8192, 9000, None),
        "'max_tokens' or 'max_completion_tokens' is too large: 2048. This model's maximum context length is "
        "8192 tokens and your request has 7000 input tokens (2048 > 8192 - 7000).": (8192, 7000, 2048),
        "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it":
            (8192, 9000, None),
        "the request exceeds the available context size (8192 tokens), try increasing it": (8192, None, None),
        "Input length (9000 tokens) exceeds the maximum allowed length (8192 tokens). Use a shorter input or "
        "enable --allow-auto-truncate.": (8192, 9000, None),
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130211 "
        "tokens. Please reduce the length of the messages.": (128000, 130211, None),
    }
    for message, numbers in cases.items():
        assert is_context_overflow(400, message), message
        got = said(message)
        assert (got.window, got.prompt, got.completion) == numbers, message


def test_the_tokenize_request_is_each_servers_own_form():
    from clover_cli.agent.backends.openai_count import tokenize_body, tokens_in

    msgs = [{"role": "user", "content": "hi"}]
    assert tokenize_body("vLLM", "m", msgs, []) == {"model": "m", "messages": msgs, "add_generation_prompt": True}
    assert set(tokenize_body("SGLang", "m", msgs, [])) == {"model", "prompt"}
    assert set(tokenize_body("llama-server", "m", msgs, [])) == {"content"}  # tools/server: {"content"}
    assert tokens_in({"count": 5, "tokens": [1] * 5}, "vLLM", 1) == 5
    assert tokens_in({"tokens": [1, 2, 3]}, "llama-server", 1) == 3 + 8  # plus the template's share
    assert tokens_in({"tokens": []}, "llama-server", 1) is None and tokens_in({"detail": "x"}, "vLLM", 1) is None


def test_an_answers_prompt_count_teaches_the_ratio():
    from clover_cli.agent.backends.openai_count import request_chars

    msgs = [{"role": "user", "content": DENSE[:8000]}]
    counted = request_chars(msgs, []) // 2  # the server's usage: 2 characters a token
    answer = sse_text("ok")
    answer[-1]["usage"] = {"prompt_tokens": counted, "completion_tokens": 1}
    with ScriptedServer([answer]) as srv:
        backend = make_backend(f"openai:{srv.base_url}#m", probe=False)
        before = backend.count_tokens(msgs, [])
        list(backend.stream(msgs, []))
    assert before < counted * 0.6 and backend.count_tokens(msgs, []) == counted
