"""LLaDA 1.x exact mode's own generate options, `remasking` and `cfg_scale`, as users reach them:
GenerationConfig fields and `clover generate --remasking / --cfg-scale` (docs/engine.md,
"Families"). Through the command they give the ids of FullAttnDecoder called with the same
arguments and of LLaDA's generate (references_fullattn.py); every family accepts their defaults
and refuses anything else with one line (docs/design.md, "The family table"), as LLaDA's
prefix / dual modes do."""
from __future__ import annotations

import json

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.fullattn_decode import FullAttnDecoder
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import LladaSettings
from realcfg import ACTIVE, build, released
from references_fullattn import llada_generate
from steer import Rows, steer_class

LLADA_MASK, LLADA_STOPS = 126336, (126081, 126348)
DREAM_STOPS = (151643, 151645)
pytestmark = pytest.mark.slow  # CI only, as test_fullattn.py: the released 126k / 152k vocabularies
# make every decode here cost seconds (tests/cli/test_llada_flags.py is the quick tier's share)

PROMPT = "t1000 t1017 t1033 t1050 t1101 t1150"
EXACT = ("--diffusion-mode", "exact", "--diffusion-steps", "16", "--max-new-tokens", "32", "--seed", "9")


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    """A LLaDA 8B-shaped checkpoint shrunk to 2 layers / width 64 (its real 126k vocabulary)."""
    path = build(released("llada_8b_instruct.json"), tmp_path_factory.mktemp("llada") / "m",
                 hf_type="llada", stop_ids=LLADA_STOPS, eos_boost=1.6)
    return path, load_model(str(path))


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    return build(released("dream_v0_instruct_7b.reconstructed.json"), tmp_path_factory.mktemp("dream") / "m",
                 hf_type="qwen2", stop_ids=DREAM_STOPS)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    from gemma_tiny import build as build_gemma

    return build_gemma(tmp_path_factory.mktemp("gemma") / "m", vocab=4096)


def _generate(clover, model, *flags):
    out = clover("generate", "--model", str(model), "--raw", "--prompt", PROMPT, "--json", *flags)
    assert out.exit_code == 0, out.stderr
    return json.loads(out.stdout)


def _one_line_error(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2 and out.stdout == "" and len(lines) == 1, out.stderr
    assert lines[0].startswith("clover: error: ")
    return lines[0]


def test_the_flags_give_the_decoders_and_the_references_ids(llada, clover):
    path, lm = llada
    got = _generate(clover, path, *EXACT, "--remasking", "random", "--cfg-scale", "1.5")
    prompt = got["prompt_ids"]
    assert prompt == [1000, 1017, 1033, 1050, 1101, 1150]
    cfg = GenerationConfig(max_new_tokens=32, seed=9, family=LladaSettings(
        diffusion_mode="exact", diffusion_steps=16, remasking="random", cfg_scale=1.5))
    direct = list(FullAttnDecoder(lm, prompt, cfg).run())[-1]
    assert got["token_ids"] == list(direct.token_ids)
    torch.manual_seed(9)
    ref = llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=16,
                         stops=lm.eos_token_ids, remasking="random", cfg_scale=1.5)
    assert got["token_ids"] == ref


def test_the_flags_reach_the_decode_by_construction(llada, clover, monkeypatch):
    """The network (its class, so the command's own load too) steered by steer.Rows: with k answer
    positions filled, a row says A_k (1) over B_k (0) with the prompt in view, A_k (10) over B_k
    without it. Guided at 1.5 (u + 2.5 (c - u)) every token is a B, unguided an A; with random
    remasking the two positions a step fills are the largest of that step's torch.rand over the
    sequence, repeated here from a generator seeded as the command (--seed 9)."""
    path, lm = llada
    n = 6

    def rule(p, seq):
        k = sum(seq.get(q, LLADA_MASK) != LLADA_MASK for q in range(n, n + 32))
        return None if p < n else (-1e4, {ACTIVE[2 * k]: 10.0 if seq[0] == LLADA_MASK else 1.0,
                                          ACTIVE[2 * k + 1]: 0.0})

    steer_class(monkeypatch, type(lm.model), Rows(None, rule))
    got = _generate(clover, path, *EXACT, "--remasking", "random", "--cfg-scale", "1.5")["token_ids"]
    plain = _generate(clover, path, *EXACT)["token_ids"]
    g, left, want = torch.Generator().manual_seed(9), list(range(n, n + 32)), [0] * 32
    for step in range(16):
        r = torch.rand((1, n + 32), generator=g)[0]
        for p in sorted(left, key=lambda q: -float(r[q]))[:2]:
            left.remove(p)
            want[p - n] = ACTIVE[4 * step + 1]
    assert got == want != [ACTIVE[4 * (i // 2) + 1] for i in range(32)]  # not left to right
    assert sorted(plain) == sorted(ACTIVE[4 * step] for step in range(16) for _ in range(2))


def test_each_flag_alone_matches_the_reference(llada, clover):
    path, lm = llada
    for flags, remasking, scale in ((["--remasking", "random"], "random", 0.0),
                                    (["--cfg-scale", "0.5"], "low_confidence", 0.5)):
        got = _generate(clover, path, *EXACT, *flags)
        torch.manual_seed(9)
        ref = llada_generate(lm.model, got["prompt_ids"], mask_id=LLADA_MASK, gen_length=32, block_length=32,
                             steps=16, stops=lm.eos_token_ids, remasking=remasking, cfg_scale=scale)
        assert got["token_ids"] == ref, flags


@pytest.mark.parametrize("mode", ["prefix", "dual", None])
def test_llada_refuses_them_outside_exact_mode(llada, clover, mode):
    """LLaDA's default mode is dual (engine/fullattn_parts.py), so no --diffusion-mode refuses too."""
    modes = ["--diffusion-mode", mode] if mode else []
    for flags in (["--remasking", "random"], ["--cfg-scale", "1"]):
        out = clover("generate", "--model", str(llada[0]), "--raw", "--prompt", PROMPT, "--max-new-tokens",
                     "4", *modes, *flags)
        assert "LLaDA 1.x checkpoint with --diffusion-mode exact" in _one_line_error(out)


def test_other_families_refuse_them_in_one_line(dream, gemma, clover):
    for model, name, modes in ((dream, "Dream", ["--diffusion-mode", "exact"]), (gemma, "DiffusionGemma", [])):
        for flags in (["--remasking", "random"], ["--cfg-scale", "1.5"]):
            out = clover("generate", "--model", str(model), "--raw", "--prompt", PROMPT, "--max-new-tokens",
                         "4", *modes, *flags)
            assert f"{flags[0]} does not apply to {name}" in _one_line_error(out)


def test_the_defaults_are_accepted_on_these_families(llada, dream, gemma, clover):
    defaults = ("--remasking", "low_confidence", "--cfg-scale", "0", "--max-new-tokens", "4")
    for model, modes in ((llada[0], ["--diffusion-mode", "dual"]), (llada[0], ["--diffusion-mode", "prefix"]),
                         (dream, ["--diffusion-mode", "exact", "--diffusion-steps", "4"]), (dream, []),
                         (gemma, [])):
        assert _generate(clover, model, *modes, *defaults)["token_ids"]
