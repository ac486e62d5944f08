"""LLaDA2.0 (`llada2_moe`) through our own module (engine/models/llada2.py), from the
LLaDA2.0-mini config (reconstructed, see configs/README.md) shrunk to 2 layers / width 64 with
its 256 experts, grouped routing and shared expert kept: ids equal to an independent decoder
written from inclusionAI's generate; a missing or mis-shaped tensor is one error line."""
from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from realcfg import ACTIVE, build, released
from references import llada2_generate
from steer import Steer

pytestmark = pytest.mark.slow  # CI only: the checkpoint carries the released 157,184-token vocabulary,
# so every decode here costs seconds

EOS = 156892
MASK = 156895


def _prompt(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(1000 * seed + n)
    return [ACTIVE[i] for i in torch.randint(0, len(ACTIVE), (n,), generator=g).tolist()]


@pytest.fixture(scope="module")
def llada2(tmp_path_factory):
    path = build(released("llada2_mini.reconstructed.json"), tmp_path_factory.mktemp("llada2") / "m",
                 hf_type="llada2_moe", stop_ids=(EOS,))
    return path, load_model(str(path), dtype="float64")


def test_llada2_loads_as_its_family(llada2):
    lm = llada2[1]
    assert lm.family.name == "llada2" and lm.block_size == 32 and lm.mask_token_id == MASK
    assert lm.family.stop_ids == (EOS,)
    layer1 = lm.model.model.layers[1].mlp
    assert len(layer1.experts) == 256 and layer1.gate.k == 8 and layer1.shared_experts is not None
    assert type(lm.model.model.layers[0].mlp).__name__ == "MLP"  # first_k_dense_replace = 1


@pytest.mark.parametrize("n,seed,threshold", [(5, 0, 0.95), (32, 1, 0.5), (40, 2, 0.5)])
def test_llada2_matches_its_reference(llada2, threshold, n, seed):
    lm = llada2[1]
    prompt = _prompt(n, seed)
    budget = 40  # ends inside the second block
    ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold))
    ref = llada2_generate(lm.model, prompt, mask_id=MASK, gen_length=budget, block_length=32,
                          steps=32, threshold=threshold, eos_id=EOS)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("budget,n,seed,threshold", [  # each case differs on a one-per-step rule
    (5, 32, 1, 0.95),
    (8, 6, 5, 0.95),
    (16, 40, 2, 0.95),
    (31, 10, 4, 0.95)])  # two blocks, both on the 31-step schedule
def test_llada2_small_budgets_follow_its_step_schedule(llada2, budget, n, seed, threshold):
    """A budget under 32 caps the reference's steps per block at the budget, so each step commits
    at least its share of the block (budget 5: 7, 7, 6, 6, 6; engine/transfer_schedule.py)."""
    lm = llada2[1]
    prompt = _prompt(n, seed)
    ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold))
    ref = llada2_generate(lm.model, prompt, mask_id=MASK, gen_length=budget, block_length=32,
                          steps=32, threshold=threshold, eos_id=EOS)
    assert list(ours.token_ids) == ref
    assert all(s <= budget for s in ours.stats.steps_per_block)


def test_the_llada2_cases_are_not_vacuous(llada2):
    """By construction (steer.py: the network's logits, which the reference reads too): a run
    ends on EOS inside the budget, in its second block, and one runs to the budget; with three
    positions in four sure, 0.5 commits most of a block in its first step (a block then takes at
    most 9 steps: tpf >= 34 / 17); each id for id as the reference."""
    lm = llada2[1]
    prompt = _prompt(5, 0)
    n = len(prompt)
    sure = {p: ACTIVE[p % 50] for p in range(n, 64) if p % 4}  # 3 in 4
    for force, finish, length in [({**sure, n + 33: EOS}, "eos", 34), (sure, "length", 40)]:
        with Steer(lm.model, (EOS,), force):
            ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=40, threshold=0.5))
            ref = llada2_generate(lm.model, prompt, mask_id=MASK, gen_length=40, block_length=32,
                                  steps=32, threshold=0.5, eos_id=EOS)
        assert list(ours.token_ids) == ref
        assert (ours.finish_reason, len(ours.token_ids)) == (finish, length)
        assert ours.stats.tpf > 1.5, ours.stats


EDITS = {"missing": lambda w: w.pop("model.layers.1.mlp.experts.7.up_proj.weight"),
         "shape": lambda w: w.__setitem__("model.layers.0.attention.dense.weight", torch.zeros(64, 100))}


@pytest.mark.parametrize("case,real_process", [
    ("missing", False), ("shape", False),
    # once in a real interpreter: the model is built and its weights read before the error, and
    # anything that prints on the real stderr meanwhile would make it more than one line
    ("missing", True)], ids=["missing", "shape", "missing-process"])
def test_missing_or_misshaped_tensor_is_one_line(llada2, tmp_path, clover, case, real_process):
    src = llada2[0]
    weights = load_file(str(src / "model.safetensors"))
    d = tmp_path / case
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("model.safetensors"))  # rewritten below
    EDITS[case](weights)
    save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})
    out = clover("generate", "--model", str(d), "--raw", "--prompt", "t1000", "--max-new-tokens", "4",
                 real_process=real_process)
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2 and out.stdout == "" and len(lines) == 1 and lines[0].startswith("clover: error:")
    assert ("missing weights" in lines[0]) if case == "missing" else ("shape mismatch" in lines[0])


@pytest.mark.parametrize("scaling,refused", [
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}, "'yarn'"),
    ({"rope_type": "linear", "factor": 2.0}, "'linear'"),
    ({"rope_type": "dynamic", "factor": 2.0}, "'dynamic'"),
    ({"rope_type": "default"}, None), (None, None)], ids=["yarn", "linear", "dynamic", "default", "none"])
def test_llada2_refuses_a_rope_scaling_it_does_not_implement(llada2, tmp_path, scaling, refused):
    """Our module has the default rotary only (the released configs carry no rope_scaling); any
    other type is one ModelLoadError line naming it, raised before a weight is read."""
    import json

    from clover_cli.engine.loader import ModelLoadError

    d = tmp_path / "m"
    d.mkdir()
    for f in llada2[0].iterdir():
        if f.name != "config.json":
            (d / f.name).symlink_to(f)
    raw = json.loads((llada2[0] / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(raw, rope_scaling=scaling)))
    if refused is None:
        assert load_model(str(d), dtype="float64").family.name == "llada2"
        return
    with pytest.raises(ModelLoadError) as err:
        load_model(str(d), dtype="float64")
    message = str(err.value)
    assert "\n" not in message and f"rope_scaling type {refused} is not supported" in message


def test_dream_and_llada1_are_families_now_not_refusals():
    """Dream and LLaDA 1.x are full-attention families (no longer refused), decoded by
    engine/fullattn_decode.py (tests/engine/conformance/test_fullattn.py proves their tokens)."""
    from clover_cli.engine.families import detect_family

    for model_type, name, shifted in (("Dream", "dream", True), ("llada", "llada", False)):
        family = detect_family({"model_type": model_type, "mask_token_id": 1})
        assert (family.name, family.is_diffusion, family.shifted_logits) == (name, True, shifted)


@pytest.mark.parametrize("case", ["extends", "mid_block"])
def test_llada2_prefix_reuse_gives_the_ids_of_a_cold_run(llada2, case):
    """Prefix reuse (engine/prefix_cache.py) on LLaDA2.0's own module: a request continued from
    an earlier request's cache equals the same request run cold."""
    lm = llada2[1]
    cfg = GenerationConfig(max_new_tokens=40, threshold=0.5)
    first = _prompt(40, 3)
    warm = Engine(lm)
    warm.generate(first, cfg)
    kept = list(warm.prefix_cache.entries[0].tokens)
    fresh = _prompt(37, 4)
    second = kept + fresh if case == "extends" else kept[:32 + 13] + fresh
    got = warm.generate(second, cfg)
    cold = Engine(lm, cache_mb=0).generate(second, cfg)
    assert got.token_ids == cold.token_ids and got.stats.steps_per_block == cold.stats.steps_per_block
    assert got.stats.reused_tokens == (len(kept) if case == "extends" else 32)
