"""An agent turn in the TUI on a tiny Qwen3.5-MoE hybrid in the released layout
(tests/engine/conformance/hybrid_real.py), through the in-process engine: its denoise steps and
committed blocks reach the screen while the turn runs, and the turn ends."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clover_cli.agent import events as ev
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions

from .conftest import submit, wait_for, wait_idle, wait_ready
from .screen_text import screen_text

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # ~7 s on the released layer layout (the
# quick tier runs an engine turn on the bundled model: tests/tui/test_tui_prefix.py)

BUILDER = Path(__file__).resolve().parents[1] / "engine" / "conformance" / "hybrid_real.py"


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory) -> Path:
    spec = importlib.util.spec_from_file_location("hybrid_real", BUILDER)
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    # EOS-prone weights and blocks of 8: the reply ends after a few blocks (six on this prompt)
    return builder.build("qwen3_5_moe", tmp_path_factory.mktemp("q35moe") / "m", block_size=8,
                         eos_boost=2.5)


async def test_agent_turn_on_the_qwen3_5_moe_hybrid_streams_blocks_live(repo, hybrid_dir):
    app = CloverApp(SessionOptions(model=str(hybrid_dir), root=repo, approval="auto-edit"))
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_ready(pilot)
        chat = app.chat
        backend = chat.agent.backend
        assert backend.lm.family.name == "hybrid" and backend.lm.family.recurrent
        assert type(backend.lm.model).__name__ == "Qwen3_5MoeForCausalLM"
        assert backend.lm.template_supports_tools  # the ChatML template renders the agent's tools
        seen: list[tuple[object, bool]] = []  # (event, was the turn still running when shown)
        handle = chat.handle_event

        def recording(e):
            seen.append((e, chat.busy == "generating"))
            handle(e)

        chat.handle_event = recording
        await submit(pilot, "Where is the function greet defined?")
        await wait_for(pilot, lambda: any(isinstance(e, ev.TurnFinished) for e, _ in seen), timeout=200,
                       what="the turn to finish")
        await wait_idle(pilot)
        kinds = [type(e).__name__ for e, _ in seen]
        # live: each block's denoise steps, then the block, were shown while the turn still ran,
        # a block before the next block's steps (not all at the end)
        blocks = [i for i, kind in enumerate(kinds) if kind == "BlockText"]
        assert len(blocks) >= 2 and blocks[-1] < kinds.index("TurnFinished")
        assert kinds.index("DenoiseProgress") < blocks[0]
        assert "DenoiseProgress" in kinds[blocks[0]:blocks[1]]
        assert all(busy for e, busy in seen if isinstance(e, (ev.DenoiseProgress, ev.BlockText)))
        text = "".join(e.text for e, _ in seen if isinstance(e, ev.BlockText))
        assert text.strip() and text.strip()[:20] in screen_text(app).replace("\n", "")
        (finished,) = [e for e, _ in seen if isinstance(e, ev.TurnFinished)]
        assert finished.reason == "done" and not chat.busy
        call = finished.stats["model_calls"][-1]
        assert call["generated_tokens"] > 0 and call["prompt_tokens"] > 100
