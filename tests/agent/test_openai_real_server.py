"""The openai: backend against a stub that answers as a real vLLM server did (issue 49, "Real
server"): its context-length errors and /tokenize, a connection dropped mid-answer, a chat
template that requires alternating roles, what it says about itself, and its stream's shapes."""
import json

from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import TurnFinished

from .helpers import clover_in_process, make_repo
from .openai_server import ScriptedServer, sse_text

VLLM_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 8192}]}


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
