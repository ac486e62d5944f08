"""Dream 7B and LLaDA 1.x (full-attention diffusion) through our own networks and
engine/fullattn_decode.py, from their released config.json shapes shrunk to 2 layers / width 64:
`exact` equals each family's own generate id for id, and the Fast-dLLM v1 `prefix` / `dual`
modes equal Fast-dLLM v1's own generate id for id (references_fullattn.py, written here)."""
from __future__ import annotations

import shutil
import threading

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import BlockCommitted, DenoiseStep, GenerationResult
from clover_cli.engine.families import FamilyError, detect_family
from clover_cli.engine.fullattn_decode import FullAttnDecoder
from clover_cli.engine.loader import load_model
from clover_cli.engine.settings import LladaSettings, ModeSettings
from realcfg import ACTIVE, CONFIGS, build, released
from references_fullattn import dream_fast_dllm, dream_generate, llada_fast_dllm, llada_generate
from steer import Rows, Steer, stop_ids

pytestmark = pytest.mark.slow  # CI only: the checkpoints carry the released 126k / 152k vocabularies,
# so every decode here costs seconds

DREAM_MASK, LLADA_MASK = 151666, 126336
DREAM_STOPS = (151643, 151645)  # config eos <|endoftext|>, the tokenizer's <|im_end|>
LLADA_STOPS = (126081, 126348)  # config eos <|endoftext|>, the tokenizer's <|eot_id|>


def _prompt(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(1000 * seed + n)
    return [ACTIVE[i] for i in torch.randint(0, len(ACTIVE), (n,), generator=g).tolist()]


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    path = build(released("dream_v0_instruct_7b.reconstructed.json"), tmp_path_factory.mktemp("dream") / "m",
                 hf_type="qwen2", stop_ids=DREAM_STOPS, eos_boost=1.6)
    shutil.copy(CONFIGS / "dream_v0_instruct_7b.generation_config.json", path / "generation_config.json")
    return path, load_model(str(path), dtype="float64")


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    path = build(released("llada_8b_instruct.json"), tmp_path_factory.mktemp("llada") / "m",
                 hf_type="llada", stop_ids=LLADA_STOPS, eos_boost=1.6)
    return path, load_model(str(path), dtype="float64")


@pytest.fixture(scope="module")
def bf16(dream, llada):
    """The same checkpoints loaded in bfloat16 (the dtype a GPU load picks)."""
    return {"dream": load_model(str(dream[0]), dtype="bfloat16"),
            "llada": load_model(str(llada[0]), dtype="bfloat16")}


def _config(lm, **kw) -> GenerationConfig:
    """A GenerationConfig from flat options: the family's own (its settings class's fields,
    engine/settings.py) go into `family`."""
    own = {k: kw.pop(k) for k in list(kw) if k in lm.family.row.settings.names()}
    return GenerationConfig(**kw, family=lm.family.row.settings(**own))


def _run(lm, prompt, **kw):
    return Engine(lm).generate(prompt, _config(lm, **kw))


def test_the_families_load_as_themselves(dream, llada):
    d, l = dream[1], llada[1]
    assert d.family.name == "dream" and d.family.shifted_logits and d.mask_token_id == DREAM_MASK
    assert type(d.model).__name__ == "QwenForCausalLM" and d.model.causal is False
    assert l.family.name == "llada" and not l.family.shifted_logits and l.mask_token_id == LLADA_MASK
    assert type(l.model).__name__ == "LLaDA1"
    assert set(DREAM_STOPS) <= set(d.eos_token_ids) and set(LLADA_STOPS) <= set(l.eos_token_ids)


def test_dream_attention_is_bidirectional(dream):
    """A later token changes an earlier position's logits (it would not under a causal mask)."""
    model = dream[1].model
    a = model(input_ids=torch.tensor([[1000, 1001, 1002]]), position_ids=torch.arange(3)[None]).logits
    b = model(input_ids=torch.tensor([[1000, 1001, 1003]]), position_ids=torch.arange(3)[None]).logits
    assert not torch.allclose(a[0, 0], b[0, 0])


# The matrices are thinned pairwise: every algorithm, mode, threshold and prompt shape appears,
# not every combination of them (each case costs seconds against the uncached reference).


@pytest.mark.parametrize("alg,n,seed,new,steps", [
    ("entropy", 5, 0, 12, 12),
    ("maskgit_plus", 5, 0, 24, 24),
    ("topk_margin", 17, 1, 30, 12),  # 2-3 tokens a step
    ("entropy", 9, 2, 20, 20)])
def test_dream_exact_matches_diffusion_generate(dream, alg, n, seed, new, steps):
    lm = dream[1]
    prompt = _prompt(n, seed)
    ours = _run(lm, prompt, max_new_tokens=new, diffusion_mode="exact", diffusion_alg=alg,
                diffusion_steps=steps)
    ref = dream_generate(lm.model, prompt, mask_id=DREAM_MASK, max_new_tokens=new, steps=steps, alg=alg,
                         stops=lm.eos_token_ids)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("seed", [0])
def test_dream_exact_default_is_the_checkpoints_generation_config(dream, seed):
    """generation_config.json (the released file) says alg origin (random transfers), eps 1e-3
    and 512 steps: a seeded run equals the reference seeded the same way (at 24 steps, to keep
    the test short; the 512 default is checked on the decoder)."""
    lm = dream[1]
    prompt = _prompt(7, seed)
    assert FullAttnDecoder(lm, prompt, _config(lm, diffusion_mode="exact")).exact_steps(16) == 512
    ours = _run(lm, prompt, max_new_tokens=16, diffusion_mode="exact", seed=seed, diffusion_steps=24)
    torch.manual_seed(seed)
    ref = dream_generate(lm.model, prompt, mask_id=DREAM_MASK, max_new_tokens=16, steps=24,
                         alg="origin", stops=lm.eos_token_ids)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("mode,threshold,n,seed,new", [
    ("dual", 0.9, 12, 2, 20),
    ("prefix", 0.5, 12, 2, 20),
    ("dual", 0.5, 33, 1, 64),  # two blocks
    ("prefix", 0.9, 5, 0, 40)])  # a budget inside the second block
def test_dream_fast_dllm_matches_its_reference(dream, mode, threshold, n, seed, new):
    lm = dream[1]
    prompt = _prompt(n, seed)
    ours = _run(lm, prompt, max_new_tokens=new, diffusion_mode=mode, threshold=threshold)
    gen = -(-new // 32) * 32
    ref = dream_fast_dllm(lm.model, prompt, mask_id=DREAM_MASK, gen_length=gen, block_length=32,
                          threshold=threshold, dual=mode == "dual", stops=lm.eos_token_ids, limit=new)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("mode", ["dual"])
def test_dream_fast_dllm_sampled_matches_seeded_reference(dream, mode):
    lm = dream[1]
    prompt = _prompt(6, 3)
    ours = _run(lm, prompt, max_new_tokens=40, diffusion_mode=mode, threshold=0.9, temperature=0.7,
                top_p=0.9, seed=5)
    torch.manual_seed(5)
    ref = dream_fast_dllm(lm.model, prompt, mask_id=DREAM_MASK, gen_length=64, block_length=32,
                          threshold=0.9, dual=mode == "dual", temperature=0.7, top_p=0.9,
                          stops=lm.eos_token_ids, limit=40)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("n,seed,new,steps", [(11, 2, 32, 16), (20, 1, 40, 32)])
def test_llada_exact_matches_its_generate(llada, n, seed, new, steps):
    lm = llada[1]
    prompt = _prompt(n, seed)
    ours = _run(lm, prompt, max_new_tokens=new, diffusion_mode="exact", diffusion_steps=steps)
    gen = -(-new // 32) * 32
    ref = llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=gen, block_length=32, steps=steps,
                         stops=lm.eos_token_ids, limit=new)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("mode,threshold,n,seed,new", [
    ("prefix", 0.9, 5, 0, 40),
    ("dual", 0.5, 5, 0, 40),
    ("dual", 0.9, 33, 1, 64),
    ("prefix", 0.5, 33, 1, 64)])
def test_llada_fast_dllm_matches_its_reference(llada, mode, threshold, n, seed, new):
    lm = llada[1]
    prompt = _prompt(n, seed)
    ours = _run(lm, prompt, max_new_tokens=new, diffusion_mode=mode, threshold=threshold)
    gen = -(-new // 32) * 32
    ref = llada_fast_dllm(lm.model, prompt, mask_id=LLADA_MASK, gen_length=gen, block_length=32,
                          threshold=threshold, dual=mode == "dual", stops=lm.eos_token_ids, limit=new)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("mode", ["dual", "exact"])
def test_llada_sampled_matches_seeded_reference(llada, mode):
    lm = llada[1]
    prompt = _prompt(8, 4)
    ours = _run(lm, prompt, max_new_tokens=32, diffusion_mode=mode, threshold=0.9, temperature=0.8,
                seed=11, diffusion_steps=32 if mode == "exact" else None)
    torch.manual_seed(11)
    if mode == "exact":
        ref = llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=32,
                             temperature=0.8, stops=lm.eos_token_ids)
    else:
        ref = llada_fast_dllm(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32,
                              threshold=0.9, dual=mode == "dual", temperature=0.8, stops=lm.eos_token_ids)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("n,seed", [(11, 2), (20, 1)])
def test_llada_exact_in_bfloat16_takes_the_confidence_in_the_logits_dtype(bf16, n, seed):
    """ML-GSAI's generate.py takes the softmax in the logits' dtype: in bfloat16 confidences
    round and tie, and the order of commits follows them. The ids equal the reference's; that the
    confidence is the logits'-dtype softmax (and Fast-dLLM v1's modes' a float64 one) is checked
    on the decoder's own choice, which holds on any CPU (whether a float64 confidence changes a
    given prompt's ids depends on one CPU's bfloat16 rounding)."""
    lm = bf16["llada"]
    prompt = _prompt(n, seed)
    ours = _run(lm, prompt, max_new_tokens=32, diffusion_mode="exact", diffusion_steps=32)
    ref = llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=32,
                         stops=lm.eos_token_ids, limit=32)
    assert list(ours.token_ids) == ref
    logits = torch.randn(4, 512, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)
    for mode, dtype in (("exact", torch.bfloat16), ("dual", torch.float64)):
        dec = FullAttnDecoder(lm, prompt, _config(lm, diffusion_mode=mode, diffusion_steps=32))
        x0, p = dec._llada_choice(logits)
        expected = torch.softmax(logits.to(dtype), dim=-1).gather(-1, x0[:, None])[:, 0]
        assert p.dtype == dtype and torch.equal(p, expected), mode


@pytest.mark.parametrize("family,mode", [("llada", "dual"), ("llada", "prefix"), ("dream", "exact"),
                                         ("dream", "dual")])
def test_bfloat16_matches_the_references(bf16, family, mode):
    """Fast-dLLM v1 takes LLaDA's confidence in float64, Dream's references in the logits' dtype."""
    lm = bf16[family]
    prompt = _prompt(9, 3)
    exact = dict(diffusion_alg="entropy", diffusion_steps=32) if mode == "exact" else {}
    ours = _run(lm, prompt, max_new_tokens=32, diffusion_mode=mode, threshold=0.9, **exact)
    if family == "llada":
        ref = llada_fast_dllm(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32,
                              threshold=0.9, dual=mode == "dual", stops=lm.eos_token_ids, limit=32)
    elif mode == "exact":
        ref = dream_generate(lm.model, prompt, mask_id=DREAM_MASK, max_new_tokens=32, steps=32,
                             alg="entropy", stops=lm.eos_token_ids)
    else:
        ref = dream_fast_dllm(lm.model, prompt, mask_id=DREAM_MASK, gen_length=32, block_length=32,
                              threshold=0.9, dual=True, stops=lm.eos_token_ids, limit=32)
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("remasking,cfg_scale,temperature", [
    ("random", 0.0, 0.0), ("low_confidence", 1.5, 0.0), ("random", 0.5, 0.8)])
def test_llada_exact_remasking_and_guidance_match_its_generate(llada, remasking, cfg_scale, temperature):
    """LLaDA generate's remasking='random' (a seeded uniform confidence, drawn after the Gumbel
    noise) and cfg_scale (classifier-free guidance against the prompt masked), on FullAttnDecoder."""
    lm = llada[1]
    prompt = _prompt(10, 5)
    cfg = _config(lm, max_new_tokens=32, diffusion_mode="exact", diffusion_steps=16,
                  temperature=temperature, seed=9, remasking=remasking, cfg_scale=cfg_scale)
    dec = FullAttnDecoder(lm, prompt, cfg)
    ours = list(dec.run())[-1]
    torch.manual_seed(9)
    ref = llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=16,
                         temperature=temperature, stops=lm.eos_token_ids, remasking=remasking,
                         cfg_scale=cfg_scale)
    assert list(ours.token_ids) == ref


def _exact(lm, prompt, steps, **options):
    cfg = _config(lm, max_new_tokens=32, diffusion_mode="exact", diffusion_steps=steps, seed=9, **options)
    return list(list(FullAttnDecoder(lm, prompt, cfg).run())[-1].token_ids)


def _llada_ref(lm, prompt, steps, **options):
    torch.manual_seed(9)
    return llada_generate(lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=steps,
                          stops=lm.eos_token_ids, **options)


def test_cfg_scale_changes_the_decode_by_construction(llada):
    """Every answer row says A (logit 1) over B (0) with the prompt in view and A (10) over B
    without it (steer.py's Rows; the rest -1e4): unguided every token is A; guided, u + (s+1)(c - u)
    at s = 1.5 gives A 10 + 2.5 (1 - 10) = -12.5 against B's 0, so every token is B."""
    lm, (a, b) = llada[1], ACTIVE[:2]
    prompt = _prompt(10, 5)
    n = len(prompt)

    def rule(p, seq):
        return None if p < n else (-1e4, {a: 10.0 if seq[0] == LLADA_MASK else 1.0, b: 0.0})

    with Rows(lm.model, rule):
        guided, plain = _exact(lm, prompt, 16, cfg_scale=1.5), _exact(lm, prompt, 16)
        assert guided == _llada_ref(lm, prompt, 16, cfg_scale=1.5)
    assert (guided, plain) == ([b] * 32, [a] * 32)


def test_random_remasking_commits_in_the_seeds_order_by_construction(llada):
    """One commit per step, and the token a step commits says how many answer positions were
    filled before it (ACTIVE[k]); each row's confidence falls left to right (one logit of 20 -
    (p - n) / 4 over a row of zeros). low_confidence fills left to right; 'random' takes the
    masked position of largest torch.rand of the sequence each step, that draw repeated here from a
    generator seeded as the decode (LLaDA generate.py, greedy: the only draw of a step)."""
    lm = llada[1]
    prompt = _prompt(10, 5)
    n = len(prompt)

    def rule(p, seq):
        filled = sum(seq.get(q, LLADA_MASK) != LLADA_MASK for q in range(n, n + 32))
        return None if p < n else (0.0, {ACTIVE[filled]: 20.0 - (p - n) / 4})

    g, left, want = torch.Generator().manual_seed(9), list(range(n, n + 32)), [0] * 32
    for step in range(32):
        r = torch.rand((1, n + 32), generator=g)[0]
        p = max(left, key=lambda q: float(r[q]))
        left.remove(p)
        want[p - n] = ACTIVE[step]
    with Rows(lm.model, rule):
        shuffled, plain = _exact(lm, prompt, 32, remasking="random"), _exact(lm, prompt, 32)
        assert shuffled == _llada_ref(lm, prompt, 32, remasking="random")
    assert plain == ACTIVE[:32] and shuffled == want and want != ACTIVE[:32]


def test_llada_options_are_refused_elsewhere(dream, llada):
    cases = [(llada[1], "dual", "exact decode's options"), (llada[1], None, "exact decode's options"),
             (dream[1], "exact", "cfg_scale applies to LLaDA 1.x checkpoints only; this model is Dream")]
    for lm, mode, error in cases:  # None: the default mode (dual)
        with pytest.raises(ValueError, match=error):
            FullAttnDecoder(lm, [1, 2], GenerationConfig(family=LladaSettings(diffusion_mode=mode, cfg_scale=1.0)))
    with pytest.raises(ValueError, match="remasking must be"):
        LladaSettings(diffusion_mode="exact", remasking="top")


def test_the_cases_are_not_vacuous(llada):
    """By construction (steer.py: the network's logits, which the reference reads too): a run
    ends on EOS inside the budget, one runs to the budget, and the cached modes commit several
    tokens per forward, each id for id as the reference."""
    lm, stops = llada[1], stop_ids(llada[1])
    prompt = _prompt(33, 1)
    n = len(prompt)
    cases = [("dual", {n + 3: LLADA_STOPS[0]}, "eos", 4),  # EOS certain at the 4th token only
             ("prefix", {p: ACTIVE[p % 50] for p in range(n, n + 64) if p % 4}, "length", 40)]  # 3 in 4 sure
    for mode, force, finish, length in cases:
        with Steer(lm.model, stops, force):
            ours = _run(lm, prompt, max_new_tokens=40, diffusion_mode=mode, threshold=0.5)
            ref = llada_fast_dllm(lm.model, prompt, mask_id=LLADA_MASK, gen_length=64, block_length=32,
                                  threshold=0.5, dual=mode == "dual", stops=lm.eos_token_ids, limit=40)
        assert list(ours.token_ids) == ref
        assert (ours.finish_reason, len(ours.token_ids)) == (finish, length)
        if finish == "length":  # 24 sure positions commit in each block's first forward: a block
            # takes at most 9 forwards, 40 tokens at most 18 (tpf >= 2.2)
            assert ours.stats.tpf > 1.5, ours.stats


def test_the_cached_modes_differ_from_exact_by_construction(llada):
    """Else nothing is tested about the cache. The cached modes run the block without the prompt
    after its first forward: a forward holding the prompt is sure only of the block's first
    masked position (A, the rest nearly flat), one without it is sure of B everywhere, so exact
    decodes A throughout and the cached modes A then Bs, each id for id as its reference."""
    lm, stops = llada[1], llada[1].eos_token_ids
    prompt = _prompt(12, 2)
    n, (a, b) = len(prompt), ACTIVE[:2]

    def rule(p, seq):
        if p < n:
            return None
        if 0 not in seq:
            return -1e4, {b: 0.0}
        first = next(q for q in range(n, n + 32) if seq[q] == LLADA_MASK)
        return (-1e4, {a: 0.0}) if p == first else (0.0, {a: 1.0})

    with Rows(lm.model, rule):
        exact = _run(lm, prompt, max_new_tokens=32, diffusion_mode="exact", diffusion_steps=32)
        assert list(exact.token_ids) == [a] * 32 == llada_generate(
            lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, steps=32, stops=stops)
        for mode in ("dual", "prefix"):
            ours = _run(lm, prompt, max_new_tokens=32, diffusion_mode=mode, threshold=0.5)
            assert list(ours.token_ids) == [a] + [b] * 31 == llada_fast_dllm(
                lm.model, prompt, mask_id=LLADA_MASK, gen_length=32, block_length=32, threshold=0.5,
                dual=mode == "dual", stops=stops), mode


def test_events_stream_live_and_cancel_is_honoured(dream):
    lm = dream[1]
    events = list(Engine(lm).stream(_prompt(5, 0), GenerationConfig(max_new_tokens=64, threshold=0.5)))
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    blocks = [e for e in events if isinstance(e, BlockCommitted)]
    result = events[-1]
    assert isinstance(result, GenerationResult) and steps and blocks
    assert sum((b.token_ids for b in blocks), ()) == result.token_ids
    assert "".join(b.text for b in blocks) == result.text
    assert result.stats.forwards == len(steps)
    cancel = threading.Event()
    seen = []
    for event in Engine(lm).stream(_prompt(5, 0), _config(lm, max_new_tokens=64, diffusion_mode="exact",
                                                          diffusion_alg="entropy"), cancel):
        seen.append(event)
        if isinstance(event, DenoiseStep) and event.step == 2:
            cancel.set()
    assert isinstance(seen[-1], GenerationResult) and seen[-1].finish_reason == "cancelled"
    assert seen[-1].stats.forwards == 2


def test_family_detection_and_mode_errors(llada):
    assert detect_family({"model_type": "Dream", "mask_token_id": 151666}).name == "dream"
    fam = detect_family({"model_type": "llada"})
    assert fam.name == "llada" and fam.mask_token_id == LLADA_MASK and not fam.shifted_logits
    with pytest.raises(ValueError, match="unknown diffusion mode 'fast'"):
        ModeSettings(diffusion_mode="fast")
    tiny = load_model("tiny")
    with pytest.raises(ValueError, match="diffusion_mode applies to Dream and LLaDA 1.x checkpoints only"):
        Engine(tiny).generate([1, 2, 3], GenerationConfig(max_new_tokens=4, family=ModeSettings(diffusion_mode="dual")))
    with pytest.raises(ValueError, match="must be a multiple of the number of blocks"):
        _run(llada[1], _prompt(5, 0), max_new_tokens=64, diffusion_mode="exact", diffusion_steps=33)
    with pytest.raises(FamilyError, match="no model_type"):
        detect_family({})


def test_generate_names_the_modes_and_refuses_one_for_another_family(dream, llada, clover):
    help_text = clover("generate", "--help").stdout
    assert "--diffusion-mode" in help_text and "approximate" in help_text and "exact" in help_text
    out = clover("generate", "--model", "tiny", "--raw", "--prompt", "hello", "--max-new-tokens", "4",
                 "--diffusion-mode", "dual")
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2 and out.stdout == "" and len(lines) == 1
    assert lines[0].startswith("clover: error:") and "Dream and LLaDA 1.x" in lines[0]
    import json

    out = clover("generate", "--model", str(dream[0]), "--raw", "--prompt", "t1000 t1001 t1002",
                 "--max-new-tokens", "8", "--diffusion-mode", "prefix", "--json")
    assert out.exit_code == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["diffusion_mode"] == "prefix cache (approx)" and 1 <= len(got["token_ids"]) <= 8
    out = clover("--diffusion-mode", "exact", "generate", "--model", str(dream[0]), "--raw", "--prompt",
                 "t1000", "--max-new-tokens", "4", "--diffusion-steps", "4", "--json")
    assert json.loads(out.stdout)["diffusion_mode"] == "exact (reference)"
    out = clover("generate", "--model", str(llada[0]), "--raw", "--prompt", "t1000", "--max-new-tokens", "64",
                 "--diffusion-mode", "exact", "--diffusion-steps", "33")
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2 and len(lines) == 1 and "multiple of the number of blocks (2)" in lines[0]


def test_the_cached_modes_default_to_fast_dllm_threshold_unless_one_is_set(dream, clover, tmp_path,
                                                                         monkeypatch):
    """Fast-dLLM v1's threshold, 0.9, when the user sets none (docs/engine.md, "Families"); a
    threshold given on the command line or in the user's config wins; other families keep 0.95."""
    import json

    from clover_cli.agent.backends.engine_backend import EngineBackend
    from clover_cli.commands.options import chosen_threshold
    from clover_cli.config import load_settings

    args = ("generate", "--model", str(dream[0]), "--raw", "--prompt", "t1000", "--max-new-tokens", "4",
            "--json")
    assert json.loads(clover(*args).stdout)["threshold"] == 0.9
    assert json.loads(clover(*args, "--threshold", "0.95").stdout)["threshold"] == 0.95
    tiny = clover("generate", "--model", "tiny", "--raw", "--prompt", "x", "--max-new-tokens", "2", "--json")
    assert json.loads(tiny.stdout)["threshold"] == 0.95

    assert EngineBackend(str(dream[0]), lm=dream[1]).threshold == 0.9  # none set
    assert EngineBackend(str(dream[0]), threshold=0.95, lm=dream[1]).threshold == 0.95
    assert EngineBackend("tiny", lm=load_model("tiny")).threshold == 0.95
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert chosen_threshold(load_settings(None)) is None
    (tmp_path / "clover").mkdir()
    (tmp_path / "clover" / "config.toml").write_text("threshold = 0.95\n")
    assert chosen_threshold(load_settings(None)) == 0.95  # the user's own choice is kept


def test_generate_accepts_what_full_attention_already_does_and_refuses_the_rest(dream, clover):
    """--no-token-healing, --repetition-penalty 1, --no-edit ask for nothing Dream lacks; asking
    for healing or repetition control is one line (docs/design.md, "The family table")."""
    args = ("generate", "--model", str(dream[0]), "--raw", "--prompt", "t1000", "--max-new-tokens", "4")
    out = clover(*args, "--no-token-healing", "--repetition-penalty", "1", "--no-edit", "--max-post-steps", "0")
    assert out.exit_code == 0, out.stderr
    for flags in (["--token-healing"], ["--repetition-penalty", "1.2"], ["--sub-block", "4"]):
        out = clover(*args, *flags)
        lines = out.stderr.strip().splitlines()
        assert out.exit_code == 2 and len(lines) == 1 and f"{flags[0]} does not apply to Dream" in lines[0]
