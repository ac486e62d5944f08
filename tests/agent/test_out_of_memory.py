"""An out-of-memory error during a turn ends that turn with one line; the session, its history and
the model survive, and the engine's prefix cache gets a smaller budget (docs/engine.md, "Placement").

The model is the bundled one; the out-of-memory error is raised by the network itself (a forward
hook on its real module, as torch raises it from an allocation), not by a stand-in for our code."""
import torch

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import AgentError, TurnFinished

from .helpers import make_repo


def test_out_of_memory_ends_the_turn_and_the_session_goes_on(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend("tiny", cache_mb=64)
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=8, tool_names=("read_file",)))

    def out_of_memory(module, args, kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    hook = backend.lm.model.register_forward_pre_hook(out_of_memory, with_kwargs=True)
    events = list(agent.run_turn("First question."))
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.reason == "error"
    errors = [e for e in events if isinstance(e, AgentError)]
    assert len(errors) == 1 and "\n" not in errors[0].message
    assert errors[0].message.startswith("out of memory on cpu (CPU)")
    assert "prefix cache now keeps at most 32 MiB" in errors[0].message
    assert backend.engine.prefix_cache.budget == 32 << 20

    hook.remove()
    events = list(agent.run_turn("Second question."))
    end = events[-1]  # the demo model answers (whatever it says): the backend still works
    assert isinstance(end, TurnFinished) and end.reason != "error" and end.stats["generated_tokens"] > 0
    users = [m["content"] for m in agent.messages if m["role"] == "user"]
    assert users[0] == "First question." and "Second question." in users[1:]
