"""An agent turn on a tiny DiffusionGemma checkpoint in the TUI: the denoise view
shows its steps and the answer's canvases arrive while the turn runs, and the turn ends. Random
weights: the mechanics are what is tested, not the words."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clover_cli.agent import events as ev
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions

from .conftest import submit, wait_for, wait_idle, wait_ready

pytestmark = pytest.mark.timeout(120)


def _gemma_tiny():
    path = Path(__file__).resolve().parents[1] / "engine" / "conformance" / "gemma_tiny.py"
    spec = importlib.util.spec_from_file_location("gemma_tiny", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory) -> Path:
    return _gemma_tiny().build(tmp_path_factory.mktemp("gemma_tui") / "m", vocab=4096, eos_boost=1.5)


def _eos_in_the_second_canvas(monkeypatch) -> None:
    """The network's logits (transformers' class, so the app's own load) are sure of ordinary
    token 1000 + r at canvas row r, except EOS at row 5 of a generation's second canvas: every
    answer is text in two canvases by construction, whatever the random weights and one CPU's
    float path make."""
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion as network

    tiny = _gemma_tiny()
    stops, eos = tiny.GENERATION["eos_token_id"], tiny.EOS
    inner, starts = network.forward, []

    def forward(self, *args, **kwargs):
        out = inner(self, *args, **kwargs)
        start = int(kwargs["decoder_position_ids"][0, 0])
        if not starts or start < starts[-1]:
            starts[:] = [start]  # a new generation
        elif start != starts[-1]:
            starts.append(start)
        logits = out.logits.clone()
        logits[..., stops] = -1e4
        rows = torch.arange(logits.shape[1])
        logits[0, rows, 1000 + rows] = 1e4
        if len(starts) == 2:
            logits[0, 5, eos] = 2e4  # above row 5's ordinary token
        out.logits = logits
        return out

    monkeypatch.setattr(network, "forward", forward)


async def test_engine_turn_on_diffusion_gemma_streams_canvases_live(repo, gemma_dir, monkeypatch):
    _eos_in_the_second_canvas(monkeypatch)
    app = CloverApp(SessionOptions(model=str(gemma_dir), root=repo, approval="auto-edit",
                                   backend_options={"seed": 0}))  # the same canvases every run
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_ready(pilot)
        chat = app.chat
        assert chat.agent is not None
        # the status line names the canvas and the sampler; no threshold (it takes none)
        status = chat.status.info.text()
        assert "canvas 16 · entropy-bound" in status and "thr" not in status, status
        await pilot.press("ctrl+t")  # the denoise view
        shown = []  # every agent event the chat screen handled, in order (then handled as usual)
        handle = chat.handle_event

        def recording(event):
            shown.append((event, chat.transcript.last_answer()))
            handle(event)

        chat.handle_event = recording
        await submit(pilot, "Where is greet defined?")
        await wait_for(pilot, lambda: any(isinstance(e, ev.TurnFinished) for e, _ in shown),
                       timeout=90, what="the turn's end")
        await wait_idle(pilot)
        kinds = [type(e).__name__ for e, _ in shown]
        # denoise steps of each canvas, then the canvas's text, canvas after canvas, then the end
        first_text = kinds.index("BlockText")
        assert "DenoiseProgress" in kinds[:first_text]
        blocks = [e.block_index for e, _ in shown if isinstance(e, ev.BlockText) and e.text]
        assert blocks == [0, 1], kinds  # two canvases, each shown when it was committed
        later_steps = [i for i, (e, _) in enumerate(shown)
                       if isinstance(e, ev.DenoiseProgress) and e.block_index == blocks[-1]]
        assert later_steps and later_steps[0] > first_text  # text was on screen while decoding went on
        assert any(answer for e, answer in shown[first_text + 1:later_steps[0] + 1])
        assert kinds[-1] == "TurnFinished" and chat.transcript.last_answer()
        assert not chat.busy
