"""The in-process engine backend with tiny random models built in the test, end to end."""
import json

import pytest

from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
from clover_cli.agent.events import BlockText, DenoiseProgress, TurnFinished
from clover_cli.agent.render import render_prompt

from .helpers import make_repo

pytestmark = pytest.mark.slow
TOOLS = ("read_file",)  # one tool keeps the prompt short (the tiny tokenizer is byte-level-ish)

# A Qwen-style template that takes tools= (the tiny tokenizer's own template does not).
TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n{% for t in tools %}{{ t['function']['name'] }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    from tiny_checkpoints import build_tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny-models")
    made = {}
    for kind in ("clover", "ar"):
        path = build_tiny_checkpoint(root / kind, kind, block_size=8, logit_scale=12.0 if kind == "clover" else 1.0)
        # the tiny byte-level tokenizer needs ~1.2k tokens for the system prompt and one tool schema
        cfg = json.loads((path / "config.json").read_text())
        cfg["max_position_embeddings"] = 4096
        (path / "config.json").write_text(json.dumps(cfg))
        made[kind] = path
    return made


def test_block_diffusion_turn_end_to_end(tmp_path, tiny_dirs):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(str(tiny_dirs["clover"]), threshold=0.9)
    assert backend.info["is_diffusion"] and backend.info["block_size"] == 8 and backend.info["threshold"] == 0.9
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=24, tool_names=TOOLS))
    events = list(agent.run_turn("Say hello."))
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.reason == "done"
    blocks = [e for e in events if isinstance(e, BlockText)]
    steps = [e for e in events if isinstance(e, DenoiseProgress)]
    assert blocks and steps
    assert all(1 <= len(s.pieces) == len(s.masked) <= 8 for s in steps)  # the first block holds the prompt tail
    # every block after the first is a whole canvas, wherever this CPU's random model ends
    assert all(len(s.pieces) == 8 for s in steps if s.block_index != steps[0].block_index)
    assert all(p == "" for s in steps for p, m in zip(s.pieces, s.masked) if m)
    assert all(s.step >= 0 for s in steps)
    text = "".join(b.text for b in blocks)
    assert agent.messages[-1] == {"role": "assistant", "content": text}
    assert 0 < end.stats["generated_tokens"] <= 24 and end.stats["tpf"] >= 1.0
    assert end.stats["forwards"] >= len({s.block_index for s in steps})
    # the prompt was the template render of system + user (+ tool schemas in the system text)
    prompt = render_prompt(backend.lm, agent.messages[:2], agent.tools)
    assert [t["function"]["name"] for t in agent.tools] == ["read_file"]
    assert "<|im_start|>system" in prompt and "read_file" in prompt and prompt.endswith("<|im_start|>assistant\n")


def test_template_with_tools_and_cancel(tmp_path, tiny_dirs):
    from clover_cli.engine.loader import load_model

    lm = load_model(str(tiny_dirs["clover"]))
    lm.tokenizer.chat_template = TOOLS_TEMPLATE
    assert lm.template_supports_tools
    backend = make_backend(str(tiny_dirs["clover"]), lm=lm)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    tools = [{"type": "function", "function": {"name": "grep", "parameters": {}}}]
    assert render_prompt(lm, msgs, tools).startswith("<|im_start|>system\n# Tools\ngrep\n")
    assert backend.count_tokens(msgs, tools) == len(lm.encode(render_prompt(lm, msgs, tools)))

    repo = make_repo(tmp_path / "repo", git=False)
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=64, tool_names=TOOLS))
    events = []
    for ev in agent.run_turn("go"):
        events.append(ev)
        if isinstance(ev, DenoiseProgress):
            agent.cancel()
    assert events[-1].reason == "cancelled"
    assert sum(isinstance(e, DenoiseProgress) for e in events) <= 2  # stopped between engine steps
    assert [m["role"] for m in agent.messages][-1] in ("user", "assistant")


def test_autoregressive_model_turn(tmp_path, tiny_dirs):
    repo = make_repo(tmp_path / "repo", git=False)
    backend = make_backend(str(tiny_dirs["ar"]))
    assert not backend.info["is_diffusion"] and backend.info["block_size"] == 1
    agent = Agent(backend, AgentConfig(root=repo, max_new_tokens=12, tool_names=TOOLS))
    events = list(agent.run_turn("hi"))
    assert events[-1].reason == "done" and not any(isinstance(e, DenoiseProgress) for e in events)
    assert 0 < events[-1].stats["generated_tokens"] <= 12
