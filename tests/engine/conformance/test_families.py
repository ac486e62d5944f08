"""Checkpoints built from the released config.json of each family decode id for id as
the family's own reference generate (tests/engine/conformance/references.py), at the defaults
and at thresholds 0.95 / 0.5, with EOS-prone weights and budgets that end inside a block."""
from __future__ import annotations

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import BlockSettings
from realcfg import ACTIVE, build, released
from references import fast_dllm_generate, sdar_generate
from steer import Steer

SDAR_STOPS = (151643, 151645)  # the config's eos (151643) and the chat template's <|im_end|>
FAST_STOP = 151645


def _prompt(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(1000 * seed + n)
    return [ACTIVE[i] for i in torch.randint(0, len(ACTIVE), (n,), generator=g).tolist()]


@pytest.fixture(scope="module")
def sdar(tmp_path_factory):
    raw = released("sdar_1.7b_chat.json")
    assert raw["attn_implementation"] == "flex_attention" and raw["use_cache"] is False
    path = build(raw, tmp_path_factory.mktemp("sdar") / "m", hf_type="qwen3", stop_ids=SDAR_STOPS)
    return path, load_model(str(path), dtype="float64")


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    raw = released("fast_dllm_v2_1.5b.reconstructed.json")
    # 151643 (generation_config's extra EOS) is as likely as the stop token: the reference does
    # not stop at it, so neither may we
    path = build(raw, tmp_path_factory.mktemp("fast") / "m", hf_type="qwen2", stop_ids=(FAST_STOP, 151643),
                 eos_boost=1.3)
    return path, load_model(str(path), dtype="float64")


def test_released_configs_are_detected_as_their_families():
    """The released config.json files as they are (no weights): the quick tier's check; the slow
    tier below builds and loads checkpoints from them."""
    from clover_cli.engine.config_hygiene import clean_config
    from clover_cli.engine.families import detect_family

    raw = released("sdar_1.7b_chat.json")
    fam = detect_family(raw)
    assert (fam.name, fam.block_size, fam.mask_token_id) == ("sdar", 4, 151669)
    assert "attn_implementation" not in clean_config(raw)  # flex_attention is the engine's choice
    fam = detect_family(released("fast_dllm_v2_1.5b.reconstructed.json"))
    assert fam.name == "fast_dllm_v2" and fam.block_size == 32 and fam.mask_token_id == 151665
    assert fam.first_token_rule and fam.sub_block == 8 and fam.stop_ids == (FAST_STOP,)


@pytest.mark.slow  # builds and loads two checkpoints with the released 151,936-token vocabulary
def test_released_configs_load_as_their_families(sdar, fast):
    assert sdar[1].family.name == "sdar" and sdar[1].block_size == 4
    assert sdar[1].model.config._attn_implementation == "sdpa"  # not the checkpoint's flex_attention
    fam = fast[1].family
    assert fam.name == "fast_dllm_v2" and fast[1].block_size == 32 and fam.mask_token_id == 151665
    assert fam.first_token_rule and fam.sub_block == 8 and fam.stop_ids == (FAST_STOP,)


# thinned pairwise: each prompt length with each seed, each threshold three times (every case
# decodes against an uncached reference over a 151,936-token vocabulary)
CASES = [(5, 0, 0.95), (5, 1, 0.5), (9, 0, 0.5), (9, 1, 0.95), (12, 0, 0.95), (12, 1, 0.5)]


@pytest.mark.slow  # ~15 s: 6 decodes against an uncached reference over a 151,936-token vocabulary
@pytest.mark.parametrize("n,seed,threshold", CASES)
def test_sdar_matches_its_reference(sdar, threshold, n, seed):
    lm = sdar[1]
    prompt = _prompt(n, seed)
    budget = 23  # ends inside a block of 4
    ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold))
    ref = sdar_generate(lm.model, prompt, mask_id=151669, gen_length=budget, block_length=4,
                        threshold=threshold, stop_ids=set(SDAR_STOPS))
    assert list(ours.token_ids) == ref


@pytest.mark.slow  # ~35 s, as above: prompts ending inside the first block (7, 10), on its end (32), inside the second (40)
@pytest.mark.parametrize("n,seed,threshold", [(10, 0, 0.5), (32, 0, 0.95), (40, 1, 0.5), (7, 2, 0.95)])
def test_fast_dllm_v2_matches_its_reference(fast, threshold, n, seed):
    lm = fast[1]
    prompt = _prompt(n, seed)
    budget = 50  # ends inside the second block of 32
    ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold))
    ref = fast_dllm_generate(lm.model, prompt, mask_id=151665, max_new_tokens=budget, block_size=32,
                             small_block_size=8, threshold=threshold, stop_token=FAST_STOP)
    assert list(ours.token_ids) == ref


@pytest.mark.slow  # guards the slow reference matrices above: decodes over the 151,936-token vocabulary
def test_the_cases_are_not_vacuous(sdar, fast):
    """By construction (steer.py: the network's logits, which the reference reads too), each id
    for id as the reference: SDAR stops on a stop id 7 tokens in, in its second block, or runs
    to the budget; Fast-dLLM opens on the token carried from a block-aligned prefill, passes
    generation_config's extra EOS (151643) through and stops on its stop token, or runs to the
    budget in its second block, which a carried token opens. Fast-dLLM's logits are shifted:
    the row of p - 1 decides position p."""
    for n, force, finish, length in [(12, {12 + 6: SDAR_STOPS[1]}, "eos", 7), (12, {}, "length", 23)]:
        prompt = _prompt(n, 0)
        with Steer(sdar[1].model, SDAR_STOPS, force):
            got = Engine(sdar[1]).generate(prompt, GenerationConfig(max_new_tokens=23, threshold=0.9))
            ref = sdar_generate(sdar[1].model, prompt, mask_id=151669, gen_length=23, block_length=4,
                                threshold=0.9, stop_ids=set(SDAR_STOPS))
        assert list(got.token_ids) == ref and (got.finish_reason, len(ref)) == (finish, length)
    for n, force, finish, length in [(64, {64 + 3: 151643, 64 + 9: FAST_STOP}, "eos", 11),
                                     (45, {}, "length", 50)]:
        prompt = _prompt(n, 1)
        with Steer(fast[1].model, (FAST_STOP, 151643), force):
            got = Engine(fast[1]).generate(prompt, GenerationConfig(max_new_tokens=50, threshold=0.9))
            ref = fast_dllm_generate(fast[1].model, prompt, mask_id=151665, max_new_tokens=50, block_size=32,
                                     small_block_size=8, threshold=0.9, stop_token=FAST_STOP)
        assert list(got.token_ids) == ref and (got.finish_reason, len(ref)) == (finish, length)
        if finish == "eos":  # the extra EOS at position 64 + 4, passed through
            assert ref[4] == 151643
        else:
            assert len(got.stats.steps_per_block) == 2  # the budget ends in block 2


@pytest.mark.slow  # a reference decode, as the matrices above
def test_fast_dllm_sub_block_option(fast):
    """--sub-block / GenerationConfig.sub_block_size: 32 decodes the block as one sub-block (the
    reference with small_block_size=32)."""
    lm = fast[1]
    prompt = _prompt(10, 0)
    ours = Engine(lm).generate(prompt, GenerationConfig(
        max_new_tokens=40, threshold=0.5, family=BlockSettings(sub_block_size=32)))
    ref = fast_dllm_generate(lm.model, prompt, mask_id=151665, max_new_tokens=40, block_size=32,
                             small_block_size=32, threshold=0.5, stop_token=FAST_STOP)
    assert list(ours.token_ids) == ref


def _certain(n: int, stops: dict[int, int]):
    """A Steer force rule making every generated position certain: the stops at their output
    indices, an ordinary token elsewhere (each sub-block one step; the row of p - 1 decides p)."""
    return lambda p, seq: (stops.get(p + 1 - n) or ACTIVE[(7 * p) % len(ACTIVE)]) if p >= n - 1 else None


# (budget, {output index: stop}, finish, length); prompt 64, so blocks start at output 0, 32, 64.
# 0/32/64 are opened by the first-token rule (the prefill's or commit's last row), which selects
# nothing: Fast-dLLM v2 ends on a *selected* stop, cutting after the output's first stop
BUDGET_END = [
    (80, {64: FAST_STOP, 86: FAST_STOP}, "eos", 65),  # selected past the budget, in its block
    (80, {32: FAST_STOP, 86: FAST_STOP}, "eos", 33),  # ... cutting at an earlier block's stop
    (80, {64: FAST_STOP}, "length", 80),  # none selected: the first-token stop stays in the output
    (64, {32: FAST_STOP, 66: FAST_STOP}, "length", 64),  # selected in a block past the budget's
]


@pytest.mark.slow  # a reference decode over the 151,936-token vocabulary, as above
@pytest.mark.parametrize("budget,stops,finish,length", BUDGET_END)
def test_fast_dllm_first_token_stop_at_the_budget_end(fast, budget, stops, finish, length):
    """By construction (steer.py), id for id as the reference: the release decodes the whole block
    holding the budget's end, so a stop it selects past the budget ends the run at a stop the
    first-token rule committed before it; a block wholly past the budget is never decoded."""
    lm, n = fast[1], 64
    prompt = _prompt(n, 3)
    with Steer(lm.model, (FAST_STOP, 151643), _certain(n, stops)):
        got = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=0.9))
        ref = fast_dllm_generate(lm.model, prompt, mask_id=151665, max_new_tokens=budget, block_size=32,
                                 small_block_size=8, threshold=0.9, stop_token=FAST_STOP)
    assert list(got.token_ids) == ref and (got.finish_reason, len(ref)) == (finish, length)
    assert FAST_STOP in ref  # the first-token rule's stop is in the output either way


@pytest.mark.slow  # decodes over the 151,936-token vocabulary, as above
def test_fast_dllm_eos_confine_ends_on_a_first_token_stop(fast):
    """--eos-confine selects nothing after a committed stop: when the first-token rule opens a
    block with one, nothing is left to select and the run ends there (no mask id left in the
    output), in the budget's last block and in an earlier one."""
    lm, n = fast[1], 64
    prompt = _prompt(n, 3)
    for at in (64, 32):
        with Steer(lm.model, (FAST_STOP, 151643), _certain(n, {at: FAST_STOP})):
            got = Engine(lm).generate(prompt, GenerationConfig(
                max_new_tokens=80, threshold=0.9, family=BlockSettings(eos_confine=True)))
        assert (got.finish_reason, len(got.token_ids), got.token_ids[-1]) == ("eos", at + 1, FAST_STOP)
        assert lm.mask_token_id not in got.token_ids
