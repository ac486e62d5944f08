"""LLaDA2.1's token-editing decode (engine/edit_decode.py) on the tiny LLaDA2 checkpoint
(LLaDA2.1 keeps LLaDA2.0's network and config): ids equal to an independent decoder written from
inclusionAI's LLaDA2.1 generate (references.py::llada21_generate), with edits actually made; on
by default for a checkpoint named LLaDA2.1, off (LLaDA2.0's decode, unchanged) otherwise."""
from __future__ import annotations

import pytest

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import BlockCommitted, DenoiseStep, GenerationResult
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import EditSettings
from realcfg import ACTIVE, build, released
from references import llada21_generate, llada2_generate
from steer import Steer, rewrite_once, steer_class
from test_llada2 import EOS, MASK, _prompt

pytestmark = pytest.mark.slow  # CI only: the checkpoint carries the released 157,184-token vocabulary,
# so every decode here costs seconds


@pytest.fixture(scope="module")
def llada2(tmp_path_factory):
    path = build(released("llada2_mini.reconstructed.json"), tmp_path_factory.mktemp("llada2") / "m",
                 hf_type="llada2_moe", stop_ids=(EOS,))
    return path, load_model(str(path), dtype="float64")


@pytest.fixture(scope="module")
def llada21(llada2, tmp_path_factory):
    """The same checkpoint in a directory named as the release is (an hf: download of
    inclusionAI/LLaDA2.1-mini sits under models--inclusionAI--LLaDA2.1-mini/snapshots/...)."""
    d = tmp_path_factory.mktemp("hub") / "models--inclusionAI--LLaDA2.1-mini"
    d.mkdir()
    for f in llada2[0].iterdir():
        (d / f.name).symlink_to(f)
    return load_model(str(d), dtype="float64")


def _edit_cfg(budget, threshold, editing_threshold, post=16, temperature=0.0, **own):
    """A request that edits: LLaDA2's own settings (engine/settings.py, EditSettings), plus `own`."""
    return GenerationConfig(max_new_tokens=budget, threshold=threshold, temperature=temperature,
                            family=EditSettings(editing=True, editing_threshold=editing_threshold,
                                                max_post_steps=post, **own))


@pytest.mark.parametrize("n,seed,budget,threshold,editing_threshold,post", [
    (5, 0, 12, 0.5, 0.5, 16),
    (40, 2, 40, 0.7, 0.5, 16),  # the model card's Q mode, two blocks
    (10, 4, 40, 0.95, 0.9, 16),  # the generate's defaults
    (10, 4, 40, 0.95, 0.5, 0),  # edits only while filling
    (32, 1, 40, 0.95, 0.5, 3)])  # at most 3 editing steps after the block is filled
def test_llada21_editing_matches_its_reference(llada2, n, seed, budget, threshold, editing_threshold,
                                               post):
    """An edit by construction (steer.py, the logits both read): position n + 2 is sure to be A
    while masked, then B, and n + 4 stays masked through the first step, so the edit comes in
    the second step even with no post steps; EOS never, so every block is decoded whole."""
    lm = llada2[1]
    prompt = _prompt(n, seed)
    at = len(prompt) + 2
    edits: list = []
    with Steer(lm.model, (EOS,), rewrite_once(at, MASK, ACTIVE[1], ACTIVE[2]), unsure={at + 2: ACTIVE[3]}):
        events = list(Engine(lm).stream(prompt, _edit_cfg(budget, threshold, editing_threshold, post)))
        ref = llada21_generate(lm.model, prompt, mask_id=MASK, gen_length=budget, block_length=32,
                               threshold=threshold, editing_threshold=editing_threshold,
                               max_post_steps=post, eos_id=EOS, edits=edits)
    assert list(events[-1].token_ids) == ref
    # not vacuous: the reference rewrote committed tokens, and so did we
    assert (at // 32, 1, at % 32, ACTIVE[1], ACTIVE[2]) in edits  # (block, step, offset, old, new)
    assert sum(e.edited for e in events if isinstance(e, DenoiseStep)) > 0


def test_an_edit_shows_in_the_denoise_view_and_the_block_carries_the_final_tokens(llada2):
    """By construction (steer.py): position 7 is rewritten once the block is filled, and EOS is
    sure at position 10 only; the ids equal the reference's."""
    lm = llada2[1]
    prompt = _prompt(5, 0)
    rule = rewrite_once(7, MASK, ACTIVE[1], ACTIVE[2], block=32)
    with Steer(lm.model, (EOS,), lambda p, seq: EOS if p == 10 else rule(p, seq)):
        events = list(Engine(lm).stream(prompt, _edit_cfg(12, 0.5, 0.5)))
        ref = llada21_generate(lm.model, prompt, mask_id=MASK, gen_length=12, block_length=32, threshold=0.5,
                               editing_threshold=0.5, max_post_steps=16, eos_id=EOS)
    assert list(events[-1].token_ids) == ref and len(ref) == 6 and ref[2] == ACTIVE[2]
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    rewritten = 0
    for before, after in zip(steps, steps[1:]):
        if after.block_index != before.block_index:
            continue
        for tok0, m0, tok1 in zip(before.token_ids, before.masked, after.token_ids):
            rewritten += (not m0) and tok0 != tok1  # a committed position changed its token
    assert rewritten > 0
    assert any(s.committed_now == 0 and s.edited > 0 for s in steps)  # a post-fill editing step
    block = next(e for e in events if isinstance(e, BlockCommitted))
    last = [s for s in steps if s.block_index == block.block_index][-1]
    result = events[-1]
    assert isinstance(result, GenerationResult) and result.finish_reason == "eos"
    assert block.token_ids == result.token_ids == last.token_ids[:len(block.token_ids)]
    assert result.stats.steps_per_block == (last.step,)


def test_a_llada21_checkpoint_edits_by_default_and_llada20_does_not(llada2, llada21):
    """By construction (steer.py, on both loads of the weights): position 9 is sure to be A while
    masked, then B, so an editing decode rewrites it and LLaDA2.0's keeps A."""
    prompt = _prompt(7, 5)
    plain = GenerationConfig(max_new_tokens=12, threshold=0.5)
    rule = rewrite_once(9, MASK, ACTIVE[1], ACTIVE[2])
    with Steer(llada2[1].model, (EOS,), rule), Steer(llada21.model, (EOS,), rule):
        as_21 = Engine(llada21).generate(prompt, plain)
        edited = Engine(llada2[1]).generate(prompt, GenerationConfig(max_new_tokens=12, threshold=0.5,
                                                                    family=EditSettings(editing=True)))
        as_20 = Engine(llada2[1]).generate(prompt, plain)
        off = Engine(llada21).generate(prompt, GenerationConfig(max_new_tokens=12, threshold=0.5,
                                                               family=EditSettings(editing=False)))
        ref20 = llada2_generate(llada2[1].model, prompt, mask_id=MASK, gen_length=12, block_length=32,
                                steps=32, threshold=0.5, eos_id=EOS)
    assert as_21.token_ids == edited.token_ids  # editing, at the generate's defaults (0.9, 16)
    assert list(as_20.token_ids) == list(off.token_ids) == ref20  # LLaDA2.0's decode
    assert (as_21.token_ids[2], as_20.token_ids[2]) == (ACTIVE[2], ACTIVE[1])


def test_llada21_prefix_reuse_gives_the_ids_of_a_cold_run(llada2):
    lm = llada2[1]
    cfg = _edit_cfg(12, 0.5, 0.5)
    warm = Engine(lm)
    warm.generate(_prompt(40, 3), cfg)
    kept = list(warm.prefix_cache.entries[0].tokens)
    second = kept + _prompt(7, 4)
    got = warm.generate(second, cfg)
    cold = Engine(lm, cache_mb=0).generate(second, cfg)
    assert got.stats.reused_tokens == len(kept) // 32 * 32 > 0
    assert got.token_ids == cold.token_ids and got.stats.steps_per_block == cold.stats.steps_per_block


@pytest.mark.parametrize("kw,reason", [
    ({"temperature": 0.7}, "greedily"),
    ({"eos_confine": True}, "eos-confine"),
    ({"sub_block_size": 8}, "sub-block")])
def test_editing_refuses_what_it_does_not_take(llada2, kw, reason):
    with pytest.raises(ValueError, match=reason):
        Engine(llada2[1]).generate(_prompt(5, 0), _edit_cfg(8, 0.5, 0.5, **kw))


def test_editing_is_refused_for_other_families():
    lm = load_model("tiny")
    with pytest.raises(ValueError, match="editing applies to LLaDA2 checkpoints only; this model is Clover"):
        Engine(lm).generate([1, 2, 3], GenerationConfig(max_new_tokens=4, family=EditSettings(editing=True)))
    # off, or the checkpoint's own (None): nothing asked of a family without editing
    for editing in (False, None):
        assert Engine(lm).generate([1, 2, 3], GenerationConfig(max_new_tokens=4, family=EditSettings(
            editing=editing))).stats.generated_tokens >= 1


def test_clover_generate_switches_editing(llada2, clover, monkeypatch):
    """`--edit --editing-threshold X --max-post-steps N` reach the engine; `--edit` on a model
    without an editing decode is one error line, exit 2."""
    import json

    prompt = _prompt(5, 0)
    text = " ".join(f"t{i}" for i in prompt)
    out = clover("generate", "--model", str(llada2[0]), "--raw", "--no-token-healing", "--prompt", text,
                 "--max-new-tokens", "12", "--threshold", "0.5", "--edit", "--editing-threshold", "0.5",
                 "--max-post-steps", "16", "--json")
    assert out.exit_code == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["prompt_ids"] == prompt
    want = Engine(llada2[1]).generate(prompt, _edit_cfg(12, 0.5, 0.5))
    assert got["token_ids"] == list(want.token_ids)
    # by construction (steer.py, on the network's class, so the command's own load too): the third
    # token is sure to be A while masked, then B: the editing decode rewrites it, the plain keeps A
    rule = rewrite_once(len(prompt) + 2, MASK, ACTIVE[1], ACTIVE[2])
    steer_class(monkeypatch, type(llada2[1].model), Steer(None, (EOS,), rule))
    edited = json.loads(clover("generate", "--model", str(llada2[0]), "--raw", "--no-token-healing", "--prompt",
                               text, "--max-new-tokens", "12", "--threshold", "0.5", "--edit",
                               "--editing-threshold", "0.5", "--max-post-steps", "16", "--json").stdout)
    plain = Engine(llada2[1]).generate(prompt, GenerationConfig(max_new_tokens=12, threshold=0.5))
    assert (edited["token_ids"][2], plain.token_ids[2]) == (ACTIVE[2], ACTIVE[1])
    bad = clover("generate", "--model", "tiny", "--raw", "--prompt", "def f", "--max-new-tokens", "4",
                 "--edit")
    lines = bad.stderr.strip().splitlines()
    assert bad.exit_code == 2 and len(lines) == 1 and "--edit does not apply to Clover" in lines[0]
    off = clover("generate", "--model", "tiny", "--raw", "--prompt", "def f", "--max-new-tokens", "4",
                 "--no-edit", "--max-post-steps", "0")  # what it already does: accepted
    assert off.exit_code == 0, off.stderr
