"""An agent turn in the TUI on a tiny Dream checkpoint (full-attention diffusion,
engine/fullattn_decode.py), built from the released config.json shape with random weights and a
Qwen-style chat template that carries tools: blocks arrive live, the turn ends, and the status
line names the decoding mode (docs/tui.md, "Status bar")."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clover_cli.agent import events as ev
from clover_cli.engine.loader import bundled_tiny_dir
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.widgets.status_bar import StatusInfo

from .conftest import submit, wait_for, wait_idle, wait_ready

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine" / "conformance"))
from realcfg import build, released  # noqa: E402  (the conformance tests' checkpoint builder)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def dream_dir(tmp_path_factory) -> Path:
    template = (bundled_tiny_dir() / "chat_template.jinja").read_text()  # Qwen-style, with tools
    # the MLP shrinks too (18944 -> 128): an agent prompt is thousands of positions, each through
    # the MLP at every block; EOS made likely, so a random model ends inside the first blocks
    raw = dict(released("dream_v0_instruct_7b.reconstructed.json"), intermediate_size=128)
    return build(raw, tmp_path_factory.mktemp("dream") / "m", hf_type="qwen2", stop_ids=(151643, 151645),
                 eos_boost=1.6, chat_template=template)


def test_mode_field_in_the_status_line():
    info = StatusInfo(model="m", block_size=32, threshold=0.9, mode="dual cache (approx)", approval="ask")
    assert info.text() == "m · block 32 · dual cache (approx) · thr 0.9 · ask"
    assert "approx" not in StatusInfo(model="m", approval="ask").text()
    assert "dual cache (approx)" in info.text(width=30)  # kept while it fits ...
    assert "dual cache" not in info.text(width=20) and "m · " in info.text(width=20)  # ... then dropped


@pytest.mark.slow  # a Dream checkpoint with the released 152k vocabulary: seconds a turn
@pytest.mark.parametrize("mode,label", [(None, "dual cache (approx)"), ("prefix", "prefix cache (approx)")])
async def test_dream_turn_streams_blocks_live_and_ends(repo, dream_dir, mode, label):
    options = {"dtype": "float32", "diffusion_mode": mode} if mode else {"dtype": "float32"}
    app = CloverApp(SessionOptions(model=str(dream_dir), root=repo, approval="auto-edit",
                                   backend_options=options))
    async with app.run_test(size=(160, 24)) as pilot:
        await wait_ready(pilot)
        chat = app.chat
        assert chat.status.info.mode == label and label in chat.status.info.text()
        names: list[str] = []
        handle = chat.handle_event

        def spy(event):  # records what reaches the screen, in order, then shows it as usual
            names.append(type(event).__name__)
            handle(event)

        chat.handle_event = spy
        await submit(pilot, "Where is the function greet defined?")
        await wait_for(pilot, lambda: "TurnFinished" in names, timeout=200, what="the turn to finish")
        await wait_idle(pilot)
        blocks = [i for i, name in enumerate(names) if name == ev.BlockText.__name__]
        finished = names.index("TurnFinished")
        assert blocks and max(blocks) < finished, names  # blocks came before the turn ended
        assert "DenoiseProgress" in names  # the live denoise view was fed step by step
        assert names.index("DenoiseProgress") < names.index("BlockText")
        assert not chat.busy and chat.status.info.mode == label
