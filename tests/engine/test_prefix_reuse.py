"""Prefix reuse (engine/prefix_cache.py, docs/engine.md "Prefix reuse"): a request that starts
from an earlier request's cache gives the token ids, steps per block and ending of the same
request run cold, for every family, whether the shared prefix ends inside a block, exactly on a
block boundary, extends the whole earlier request, or is empty; and it really reuses."""
from __future__ import annotations

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from steer import Steer, stop_ids
from tiny_checkpoints import build_tiny_checkpoint

FAMILIES = ["clover", "sdar", "fast_dllm_v2", "hybrid", "hybrid_dense", "ar", "ar_llama"]
CASES = ["extends", "mid_block", "boundary", "same_prompt", "none"]


@pytest.fixture(scope="module")
def models(tiny_dirs, tmp_path_factory):
    cache: dict[str, object] = {}

    def get(kind: str):
        if kind not in cache:
            if kind == "hybrid_dense":  # Qwen3.5 text, not among the shared tiny kinds
                path = build_tiny_checkpoint(tmp_path_factory.mktemp("q35") / "m", kind, block_size=8,
                                             logit_scale=12.0)
            else:
                path = tiny_dirs[kind]
            cache[kind] = load_model(str(path), dtype="float64")
        return cache[kind]

    return get


def _ids(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, 250, (n,), generator=g).tolist()


def _grid(lm) -> int:
    return lm.block_size if lm.is_diffusion else 1


def _second_prompt(case: str, first: list[int], kept: list[int], B: int) -> tuple[list[int], int]:
    """(prompt 2, the length of its common prefix with what request 1 left in the cache)."""
    fresh = _ids(2 * B + 5, seed=99)
    start1 = len(first) // B * B
    if case == "extends":  # the agent's case: the earlier prompt and answer, then a tool result
        return kept + fresh, len(kept)
    if case == "mid_block":
        cut = start1 + min(B, len(kept) - start1) // 2 + 1 if len(kept) > start1 else start1 - B // 2
        return kept[:cut] + fresh, cut
    if case == "boundary":
        return kept[:start1] + fresh, start1
    if case == "same_prompt":
        return list(first), len(first)
    return [first[0] + 1] + first[1:] + fresh, 0  # differs at position 0


# every family on the two cases an agent step makes (extends, mid_block); the other cases on one
# diffusion and one recurrent family in the quick tier, on every family in CI
MATRIX = [pytest.param(f, c, marks=() if c in ("extends", "mid_block") or f in ("clover", "hybrid")
                       else pytest.mark.slow, id=f"{f}-{c}") for f in FAMILIES for c in CASES]


@pytest.mark.parametrize("family,case", MATRIX)
def test_reuse_gives_the_ids_of_a_cold_run(models, family, case):
    lm = models(family)
    B = _grid(lm)
    cfg = GenerationConfig(max_new_tokens=3 * max(B, 8) + 3, threshold=0.9)
    first = _ids(2 * max(B, 8) + 5, seed=len(family))
    warm = Engine(lm)
    warm.generate(first, cfg)
    (entry,) = warm.prefix_cache.entries
    kept = list(entry.tokens)
    assert kept[:len(first) // B * B] == first[:len(first) // B * B]
    second, common = _second_prompt(case, first, kept, B)
    got = warm.generate(second, cfg)
    cold = Engine(lm, cache_mb=0).generate(second, cfg)
    assert got.token_ids == cold.token_ids
    assert got.stats.steps_per_block == cold.stats.steps_per_block
    assert got.finish_reason == cold.finish_reason
    assert cold.stats.reused_tokens == 0
    # what was reused: the longest shared prefix on the grid that the entry can restore
    limit = len(second) - 1 if B == 1 else len(second) // B * B
    usable = min(common, limit) // B * B
    if lm.family.recurrent:  # state only at the end of the entry and at request 1's prompt end
        usable = max([p for p in (len(kept), len(first) // B * B) if p <= usable] or [0])
    if lm.family.shifted_logits and usable == limit and usable not in (len(kept), len(first) // B * B):
        usable -= B  # no logits row kept there: one block is recomputed
    assert got.stats.reused_tokens == usable
    assert got.stats.prefilled_tokens == (limit if B > 1 else len(second)) - usable
    if case in ("extends", "same_prompt"):
        assert usable > 0  # these cases must really reuse


def test_the_reuse_cases_are_not_vacuous(models):
    """The extends case reuses generated blocks too (not only the prompt), and decodes more than
    one block, so a wrong cache past the prompt would change ids. Only the budget ends the run
    (steer.py takes the stop ids out of the logits): 27 tokens after a 21-token prompt are
    positions 21-47, four blocks of 8."""
    lm = models("clover")
    cfg = GenerationConfig(max_new_tokens=27, threshold=0.9)
    first = _ids(21, seed=len("clover"))
    engine = Engine(lm)
    with Steer(lm.model, stop_ids(lm)):
        one = engine.generate(first, cfg)
    assert (one.finish_reason, len(one.token_ids), one.stats.blocks) == ("length", 27, 4)
    kept = engine.prefix_cache.entries[0].tokens
    assert len(kept) > len(first) // 8 * 8 + 8


def test_a_growing_conversation_prefills_only_what_it_added(models):
    """Five steps, each the last prompt + answer + a tool result: every warm step prefills at most
    the appended tokens plus one block, and the ids equal a cold engine's at every step."""
    lm = models("clover")
    B = lm.block_size
    cfg = GenerationConfig(max_new_tokens=20, threshold=0.9)
    warm, cold = Engine(lm), Engine(lm, cache_mb=0)
    prompt = _ids(30, seed=1)
    appended = 0  # tokens the previous step added (its answer and a tool result)
    for step in range(5):
        got, ref = warm.generate(prompt, cfg), cold.generate(prompt, cfg)
        assert got.token_ids == ref.token_ids
        if step:
            assert got.stats.prefilled_tokens <= appended + 2 * B
            assert got.stats.reused_tokens >= len(prompt) - appended - B
        tool = _ids(17 + 5 * step, seed=100 + step)
        appended = len(got.token_ids) + len(tool)
        prompt = prompt + list(got.token_ids) + tool


def test_budget_evicts_least_recently_used_and_clear_forgets(models):
    lm = models("clover")
    cfg = GenerationConfig(max_new_tokens=8)
    engine = Engine(lm)
    engine.generate(_ids(40, seed=1), cfg)
    one = engine.prefix_cache.entries[0].nbytes
    engine.prefix_cache.budget = int(one * 2.5)
    engine.generate(_ids(40, seed=2), cfg)
    engine.generate(_ids(40, seed=3), cfg)
    assert len(engine.prefix_cache.entries) == 2 and engine.prefix_cache.bytes <= engine.prefix_cache.budget
    assert engine.prefix_cache.evictions == 1
    assert engine.generate(_ids(40, seed=1), cfg).stats.reused_tokens == 0  # the oldest went first
    assert engine.generate(_ids(40, seed=3), cfg).stats.reused_tokens == 40
    engine.clear_cache()
    assert not engine.prefix_cache.entries
    assert engine.generate(_ids(40, seed=3), cfg).stats.reused_tokens == 0
    engine.prefix_cache.budget = one // 2  # an entry larger than the whole budget is not kept
    engine.clear_cache()
    engine.generate(_ids(40, seed=4), cfg)
    assert not engine.prefix_cache.entries


def test_no_reuse_when_off(models):
    lm = models("clover")
    prompt, cfg = _ids(40, seed=5), GenerationConfig(max_new_tokens=8)
    engine = Engine(lm, cache_mb=0)
    engine.generate(prompt, cfg)
    assert engine.generate(prompt, cfg).stats.reused_tokens == 0
    on = Engine(lm)
    on.generate(prompt, cfg, reuse=False)
    assert not on.prefix_cache.entries
    with pytest.raises(ValueError):
        Engine(lm, cache_mb=-1)


@pytest.mark.parametrize("family", ["clover", "hybrid"])
def test_a_cancelled_or_abandoned_request_leaves_an_exact_cache(models, family):
    """Cancel mid-generation, or stop iterating after the first block: the cache kept is still
    exact (a later request equals a cold one)."""
    import threading

    lm = models(family)
    cfg = GenerationConfig(max_new_tokens=30, threshold=0.9)
    first = _ids(21, seed=7)
    for how in ("cancel", "close"):
        engine = Engine(lm)
        cancel = threading.Event()
        events = engine.stream(first, cfg, cancel=cancel)
        for ev in events:
            if type(ev).__name__ == "BlockCommitted":
                if how == "cancel":
                    cancel.set()
                else:
                    events.close()
                    break
        assert engine.prefix_cache.entries
        second = first + _ids(12, seed=8)
        got = engine.generate(second, cfg)
        assert got.stats.reused_tokens > 0
        assert got.token_ids == Engine(lm, cache_mb=0).generate(second, cfg).token_ids


def test_a_failed_forward_keeps_nothing(models, monkeypatch):
    """An exception inside a forward (KeyboardInterrupt, out of memory) leaves a half-written
    cache: it is not kept."""
    from clover_cli.engine import runtime

    lm = models("clover")
    engine = Engine(lm)
    original, calls = runtime.ForwardRunner.__call__, []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(runtime.ForwardRunner, "__call__", failing)
    with pytest.raises(KeyboardInterrupt):
        engine.generate(_ids(21, seed=9), GenerationConfig(max_new_tokens=30, threshold=0.99))
    assert not engine.prefix_cache.entries
