"""DiffusionGemma (`diffusion_gemma`) through our own sampler (engine/gemma_decode.py)
on transformers' network: ids equal transformers' own `generate` (it ships in the pinned
library, so here the reference IS the reference) for several prompts and canvas counts, an early
EOS and adaptive stopping; events stream per step and per canvas; cancel, the CLI's seed and its
refusal of --threshold."""
from __future__ import annotations

import dataclasses
import json
import shutil
import threading

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import BlockCommitted, DenoiseStep, GenerationResult
from clover_cli.engine.gemma_decode import GemmaSettings
from clover_cli.engine.loader import ModelLoadError, load_model
from gemma_tiny import CANVAS, EOS, GENERATION, TURN_CLOSE, build

STOPS = (EOS, TURN_CLOSE)  # generation_config.json's eos_token_id
PROMPTS = [[2, 105, 1001, 1002, 1003, 106, 105, 1010], [2, 1050], [2] + list(range(1100, 1121))]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """Vocabulary shrunk to 4,096 (quick), EOS likely enough that some generations end in their
    second canvas."""
    path = build(tmp_path_factory.mktemp("gemma") / "m", vocab=4096, eos_boost=1.5)
    return path, load_model(str(path), dtype="float32")


def reference(model, prompt: list[int], seed: int, **kwargs) -> list[int]:
    """transformers' DiffusionGemma generate, its new ids cut after the first EOS (later ones are
    its pad filling)."""
    torch.manual_seed(seed)
    out = model.generate(torch.tensor([prompt]), **kwargs)
    new = out.sequences[0, len(prompt):].tolist()
    for i, tok in enumerate(new):
        if tok in STOPS:
            return new[:i + 1]
    return new


def ours(lm, prompt, seed, budget, **settings):
    if settings:
        saved = lm.extra["gemma_settings"]
        lm.extra["gemma_settings"] = dataclasses.replace(saved, **settings)
    try:
        return Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, seed=seed))
    finally:
        if settings:
            lm.extra["gemma_settings"] = saved


def test_loads_as_its_family_with_the_generation_config(gemma):
    lm = gemma[1]
    assert lm.family.name == "diffusion_gemma" and lm.block_size == CANVAS
    assert type(lm.model).__name__ == "DiffusionGemmaForBlockDiffusion"
    s = lm.extra["gemma_settings"]
    assert (s.max_new_tokens, s.max_denoising_steps, s.entropy_bound, s.t_min, s.t_max) == (32, 6, 0.1, 0.4, 0.8)
    assert (s.stability_threshold, s.confidence_threshold, s.eos_token_ids) == (1, 0.005, STOPS)


def test_settings_take_the_reference_defaults_where_the_file_is_silent():
    s = GemmaSettings.from_dict({"max_denoising_steps": 12})
    assert (s.max_new_tokens, s.max_denoising_steps, s.entropy_bound) == (256, 12, 0.1)
    assert (s.t_min, s.t_max, s.stability_threshold, s.confidence_threshold) == (0.4, 0.8, 1, 0.005)
    assert s.eos_token_ids is None and s.adaptive_stop


def test_a_bad_generation_config_is_one_error_line(gemma, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(gemma[0], bad)
    (bad / "generation_config.json").write_text(json.dumps(dict(GENERATION, max_denoising_steps=0)))
    with pytest.raises(ModelLoadError) as err:
        load_model(str(bad))
    assert "max_denoising_steps must be a positive integer" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("p,seed,budget", [
    (0, 0, CANVAS), (1, 1, 3 * CANVAS),
    pytest.param(2, 2, CANVAS, marks=pytest.mark.slow), pytest.param(0, 3, 3 * CANVAS, marks=pytest.mark.slow)],
    ids=["0-0-1canvas", "1-1-3canvases", "2-2-1canvas", "0-3-3canvases"])
def test_ids_equal_transformers_generate(gemma, p, seed, budget):
    lm = gemma[1]
    got = ours(lm, PROMPTS[p], seed, budget)
    assert list(got.token_ids) == reference(lm.model, PROMPTS[p], seed, max_new_tokens=budget)


@pytest.mark.parametrize("p,seed,budget", [(1, 1, 3 * CANVAS), (2, 2, 2 * CANVAS)])
def test_ids_equal_transformers_generate_in_bfloat16(gemma, p, seed, budget):
    """bfloat16, the dtype a GPU load picks: the sampler's arithmetic follows the reference's
    dtypes (float32 softmax, self-conditioning in the embeddings' dtype), so ids still agree."""
    lm = load_model(str(gemma[0]), dtype="bfloat16")
    assert lm.model.dtype == torch.bfloat16
    got = ours(lm, PROMPTS[p], seed, budget)
    assert list(got.token_ids) == reference(lm.model, PROMPTS[p], seed, max_new_tokens=budget)


class _EosAt:
    """Wraps the network's forward (ours and the reference's both call it) so that its logits
    say EOS at one position of one canvas and never anywhere else: the early EOS holds by
    construction, whatever the random stream does."""

    def __init__(self, model, canvas_start: int, offset: int):
        self.model, self.forward = model, model.forward
        self.canvas_start, self.offset = canvas_start, offset

    def __enter__(self):
        def forward(*args, **kwargs):
            out = self.forward(*args, **kwargs)
            logits = out.logits.clone()
            logits[..., list(STOPS)] = -1e4
            if int(kwargs["decoder_position_ids"][0, 0]) == self.canvas_start:
                logits[0, self.offset, EOS] = 1e4
            out.logits = logits
            return out

        self.model.forward = forward  # an instance attribute: nn.Module.__call__ and generate's
        return self                   # `self.forward` both find it

    def __exit__(self, *exc):
        del self.model.forward


@pytest.mark.parametrize("seed", [7, 3])
def test_early_eos_ends_inside_a_later_canvas_as_the_reference(gemma, seed):
    """EOS only at position 5 of the third canvas (of four allowed): both stop there."""
    lm = gemma[1]
    with _EosAt(lm.model, len(PROMPTS[0]) + 2 * CANVAS, 5):
        got = ours(lm, PROMPTS[0], seed, 4 * CANVAS)
        want = reference(lm.model, PROMPTS[0], seed, max_new_tokens=4 * CANVAS)
    assert list(got.token_ids) == want
    assert got.finish_reason == "eos" and len(got.token_ids) == 2 * CANVAS + 6
    assert got.token_ids[-1] == EOS and got.stats.blocks == 3


@pytest.mark.parametrize("seed,bound", [(0, 4.0), (1, 5.0)])
def test_adaptive_stopping_ends_canvases_early_as_the_reference(gemma, seed, bound):
    """No stability window and a confidence bound: ids equal the reference's (where a canvas
    stops is shown by construction below)."""
    lm = gemma[1]
    knobs = dict(stability_threshold=0, confidence_threshold=bound)
    got = ours(lm, PROMPTS[0], seed, 4 * CANVAS, **knobs)
    assert list(got.token_ids) == reference(lm.model, PROMPTS[0], seed, max_new_tokens=4 * CANVAS, **knobs)


class _StepTokens:
    """Wraps the network's forward (ours and the reference's both call it): at the k-th
    denoising step of a canvas every row is logit 6 for token 1000 + k over zeros, whatever the
    canvas. Its entropy at temperature t is a function of 6 / t alone (4,096 tokens: 6.39, 5.13,
    3.43, 1.74, 0.62, 0.15 at the cooling schedule's 0.8 .. 0.47; 7.87 at 1), and the output
    canvas, the last step's argmax, says at which step the canvas stopped."""

    def __init__(self, model):
        self.model, self.forward, self.steps = model, model.forward, {}

    def __enter__(self):
        def forward(*args, **kwargs):
            out = self.forward(*args, **kwargs)
            start = int(kwargs["decoder_position_ids"][0, 0])
            k = self.steps[start] = self.steps.get(start, 0) + 1
            logits = torch.zeros_like(out.logits)
            logits[..., 1000 + k] = 6.0
            out.logits = logits
            return out

        self.model.forward = forward
        return self

    def __exit__(self, *exc):
        del self.model.forward


def _stopping(lm, bound, **settings):
    """(our ids, the reference's, our steps per canvas) for two canvases under _StepTokens."""
    knobs = dict(stability_threshold=0, confidence_threshold=bound, **settings)
    with _StepTokens(lm.model):
        got = ours(lm, PROMPTS[0], 0, 2 * CANVAS, **knobs)
    with _StepTokens(lm.model):
        want = reference(lm.model, PROMPTS[0], 0, max_new_tokens=2 * CANVAS, **knobs)
    return list(got.token_ids), want, list(got.stats.steps_per_block)


@pytest.mark.parametrize("bound,steps", [(6.0, 2), (2.5, 4)])
def test_adaptive_stopping_ends_where_the_cooling_crosses_the_bound(gemma, bound, steps):
    """The mean entropy falls below the bound first at this step (_StepTokens' figures): ours
    and the reference's canvases both end there."""
    got, want, per_canvas = _stopping(gemma[1], bound)
    assert got == want == [1000 + steps] * 2 * CANVAS and per_canvas == [steps, steps]


def test_without_a_temperature_schedule_too(gemma):
    """t_min/t_max unset: the raw logits are sampled, ids equal the reference's; by construction
    (_StepTokens), at temperature 1 the entropy never falls below 2.5, so every canvas runs all six
    steps where the cooling schedule stops it at the fourth."""
    lm = gemma[1]
    got = ours(lm, PROMPTS[1], 5, 2 * CANVAS, t_min=None, t_max=None)
    assert list(got.token_ids) == reference(lm.model, PROMPTS[1], 5, max_new_tokens=2 * CANVAS,
                                            t_min=None, t_max=None)
    got, want, per_canvas = _stopping(lm, 2.5, t_min=None, t_max=None)
    assert got == want == [1006] * 2 * CANVAS and per_canvas == [6, 6]


def test_events_stream_every_step_and_every_canvas(gemma):
    lm = gemma[1]
    events = list(Engine(lm).stream(PROMPTS[0], GenerationConfig(max_new_tokens=3 * CANVAS, seed=0)))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    blocks = [e for e in events if isinstance(e, BlockCommitted)]
    assert len(steps) == sum(result.stats.steps_per_block) == result.stats.forwards
    assert [b.block_index for b in blocks] == list(range(result.stats.blocks))
    assert all(len(s.token_ids) == CANVAS == len(s.masked) for s in steps)
    assert all(s.committed_now == CANVAS - sum(s.masked) >= 1 for s in steps)
    assert sum((list(b.token_ids) for b in blocks), []) == list(result.token_ids)
    assert "".join(b.text for b in blocks) == result.text
    # the last step's draft is the canvas's output
    last = [s for s in steps if s.block_index == 0][-1]
    assert tuple(last.token_ids) == blocks[0].token_ids


def test_cancel_is_honoured_between_steps(gemma):
    lm = gemma[1]
    cancel = threading.Event()
    events = []
    for event in Engine(lm).stream(PROMPTS[0], GenerationConfig(max_new_tokens=3 * CANVAS, seed=0), cancel):
        events.append(event)
        if isinstance(event, DenoiseStep) and event.step == 2:
            cancel.set()
    result = events[-1]
    assert result.finish_reason == "cancelled" and result.stats.forwards == 2
    assert not any(isinstance(e, BlockCommitted) for e in events)


def test_the_cli_seed_reaches_the_sampler(gemma, clover, monkeypatch):
    path, lm = gemma
    out = clover("generate", "--model", str(path), "--raw", "--json", "--seed", "3", "--prompt",
                 "t1001 t1002 t1003", "--max-new-tokens", str(2 * CANVAS))
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["sampler"] == "entropy-bound" and obj["threshold"] is None and not obj["token_healing"]
    assert obj["token_ids"] == reference(lm.model, obj["prompt_ids"], 3, max_new_tokens=2 * CANVAS)
    # By construction: the network (transformers' class, so the command's own load is wrapped too)
    # is made sure of each canvas token it is given, so a canvas keeps its starting noise and the
    # output is the seeded generator's first randint, repeated here for seeds 3 and 4.
    network = type(lm.model)
    inner = network.forward

    def forward(self, *args, **kwargs):
        out = inner(self, *args, **kwargs)
        out.logits = torch.full_like(out.logits, -1e4).scatter(-1, kwargs["decoder_input_ids"][..., None], 1e4)
        return out

    monkeypatch.setattr(network, "forward", forward)
    vocab = lm.model.config.text_config.vocab_size
    for seed in (3, 4):
        got = json.loads(clover("generate", "--model", str(path), "--raw", "--json", "--seed", str(seed),
                                "--prompt", "t1001", "--max-new-tokens", str(CANVAS)).stdout)
        noise = torch.randint(0, vocab, (1, CANVAS), generator=torch.Generator().manual_seed(seed))[0].tolist()
        cut = next((i + 1 for i, tok in enumerate(noise) if tok in STOPS), CANVAS)
        assert got["token_ids"] == noise[:cut] == reference(lm.model, got["prompt_ids"], seed,
                                                            max_new_tokens=CANVAS), seed


def test_the_cli_budget_defaults_to_the_generation_config(gemma, clover):
    path, lm = gemma
    obj = json.loads(clover("generate", "--model", str(path), "--raw", "--json", "--seed", "0",
                            "--prompt", "t1050").stdout)
    # generation_config.json: max_new_tokens 32 = two canvases (the reference's own default)
    assert obj["token_ids"] == reference(lm.model, obj["prompt_ids"], 0)
    assert obj["blocks"] == 2 or obj["finish_reason"] == "eos"


@pytest.mark.parametrize("flag", [["--threshold", "0.9"], ["--temperature", "0.5"], ["--token-healing"],
                                  ["--edit"], ["--block-size", "8"], ["--repetition-penalty", "1.1"]])
def test_the_cli_refuses_options_the_sampler_ignores(gemma, clover, flag):
    out = clover("generate", "--model", str(gemma[0]), "--raw", "--prompt", "t1050", *flag)
    assert out.exit_code == 2
    line = out.stderr.strip()
    assert line.startswith(f"clover: error: {flag[0]} does not apply to DiffusionGemma") and "\n" not in line


def test_the_cli_accepts_flags_that_ask_for_what_the_sampler_already_does(gemma, clover):
    """A script passing the same flags to every model: off, or the canvas it has (issue 49)."""
    path, lm = gemma
    out = clover("generate", "--model", str(path), "--raw", "--json", "--seed", "3", "--prompt", "t1050",
                 "--max-new-tokens", str(CANVAS), "--no-token-healing", "--repetition-penalty", "1",
                 "--top-p", "1", "--no-edit", "--max-post-steps", "0", "--block-size", str(CANVAS),
                 "--sub-block", str(CANVAS))
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["token_ids"] == reference(lm.model, obj["prompt_ids"], 3, max_new_tokens=CANVAS)


@pytest.mark.slow  # the real 262,144-token vocabulary: every step's softmax and sampling over it
@pytest.mark.parametrize("p,seed", [(0, 0), (2, 1)])
def test_ids_equal_transformers_generate_with_the_real_vocabulary(tmp_path_factory, p, seed):
    path = build(tmp_path_factory.mktemp("gemma_full") / "m", eos_boost=1.5)
    lm = load_model(str(path), dtype="float32")
    got = ours(lm, PROMPTS[p], seed, 2 * CANVAS)
    assert list(got.token_ids) == reference(lm.model, PROMPTS[p], seed, max_new_tokens=2 * CANVAS)


def test_the_chat_template_renders_the_prompt(gemma, clover):
    path, lm = gemma
    obj = json.loads(clover("generate", "--model", str(path), "--json", "--seed", "1", "--prompt",
                            "t1001 t1002", "--max-new-tokens", str(CANVAS)).stdout)
    # <bos><|turn>user\n t1001 t1002<turn|>\n<|turn>model\n (the stand-in's Gemma 4 turns)
    assert obj["prompt_ids"] == [2, 105, lm.encode("user")[0], 1001, 1002, 106, 105, lm.encode("model")[0]]
    assert obj["token_ids"] == reference(lm.model, obj["prompt_ids"], 1, max_new_tokens=CANVAS)


@pytest.mark.parametrize("canvas", [0, "16", 10_000])
def test_a_bad_canvas_length_is_one_error_line(canvas):
    from clover_cli.engine.families import FamilyError, detect_family

    with pytest.raises(FamilyError, match=r"^bad canvas_length .* in config$"):
        detect_family({"model_type": "diffusion_gemma", "canvas_length": canvas})
