"""The block families in bfloat16 (the dtype a GPU load picks): each takes its confidence's
softmax in its own reference's dtype (`FamilyRow.confidence_dtype`, docs/engine.md "In
bfloat16"), and the ids equal a reference decoder that does so.

The proof is exact where our forwards and the reference's run the same shapes (then they give
the same bits): every family over one block decoded from an empty cache (the prompt and the
budget inside the first block); SDAR and Fast-dLLM v2 across blocks too, against references that
keep the KV cache as their released generates do (references_cached.py), and the GDN hybrid
against our rule written with transformers' own cache for its network. The uncached references
of references.py recompute the whole sequence each step; in bfloat16 those reductions round
differently from a cache's, so against them the later blocks are proved in float64 only
(test_families.py, test_llada2.py; LLaDA2.0's released generate itself keeps no cache). The
threshold is taken from the model's own first-step confidences: one a bfloat16 softmax and a
float32 softmax put on opposite sides of it, so each case also shows the dtype decides a commit
(a decoder in the other dtype fails it).

The reference below is written from each family's public generate (read to learn): SDAR's
`block_diffusion_generate` and Fast-dLLM v2's `batch_sample` softmax the logits in their own dtype
(Fast-dLLM v2's greedy token is the argmax of those probabilities; SDAR's release samples only,
so its greedy form takes the same argmax); LLaDA2.0's modeling casts the logits to float32 first.
"""
from __future__ import annotations

import pytest
import torch

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import DenoiseStep, GenerationResult
from clover_cli.engine.families import FAMILIES
from clover_cli.engine.loader import load_model
from realcfg import ACTIVE, build, released
from references_cached import (CachedNet, fast_dllm_generate_cached, hybrid_generate_cached,
                               sdar_generate_cached)
from steer import Steer

# family -> (released config, transformers type, stop ids, block size, prompt length, budget,
#   the dtype its reference's softmax runs in on a bfloat16 network)
CASES = {
    "sdar": ("sdar_1.7b_chat.json", "qwen3", (151643, 151645), 16, 4, 12, torch.bfloat16),
    "fast_dllm_v2": ("fast_dllm_v2_1.5b.reconstructed.json", "qwen2", (151645,), 32, 10, 14, torch.bfloat16),
    "llada2": ("llada2_mini.reconstructed.json", "llada2_moe", (156892,), 32, 10, 14, torch.float32),
    # ours: no released generate; float32, the mask's logit dropped before the softmax
    "clover": (None, "clover", (), 8, 3, 5, torch.float32),
    "hybrid": (None, "hybrid", (), 8, 3, 5, torch.float32),
}


def test_rows_record_their_references_softmax_dtype():
    """SDAR / Fast-dLLM v2 softmax the network's output as it comes (bfloat16 on a GPU);
    LLaDA2.0's modeling casts its logits to float32; ours (Clover, the hybrids) take float32."""
    got = {name: FAMILIES[name].confidence_dtype for name in
           ("sdar", "fast_dllm_v2", "llada2", "clover", "hybrid", "dream", "llada")}
    assert got == {"sdar": "logits", "fast_dllm_v2": "logits", "llada2": "float32", "clover": "float32",
                   "hybrid": "float32", "dream": "logits", "llada": "logits"}


SLOW = {"fast_dllm_v2", "llada2"}  # a 32-block over a released vocabulary: seconds a step (CI only)


@pytest.fixture(scope="module", params=[pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                        for n in sorted(CASES)])
def family(request, tmp_path_factory, tiny_dirs):
    name = request.param
    cfg, hf_type, stops, *_ = CASES[name]
    if cfg is None:  # the suite's own tiny checkpoints (tests/conftest.py)
        return name, load_model(str(tiny_dirs[hf_type]), dtype="bfloat16")
    path = build(released(cfg), tmp_path_factory.mktemp(name) / "m", hf_type=hf_type, stop_ids=stops)
    return name, load_model(str(path), dtype="bfloat16")


def _forward(model, ids: list[int]) -> torch.Tensor:
    """The logits [T, V] of one block from an empty cache, in the network's dtype (bfloat16):
    every query sees every key, so our networks take no mask and transformers' a zero one."""
    extra = {"is_causal": False} if getattr(model, "mask_free_forward", False) else {
        "attention_mask": torch.zeros(1, 1, len(ids), len(ids), dtype=next(model.parameters()).dtype)}
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), position_ids=torch.arange(len(ids))[None],
                    use_cache=False, **extra)
    return out.logits[0]


def _rule(lm, logits: torch.Tensor, dtype: torch.dtype):
    """(token [T], confidence [T]) of the family's reference greedy step: the softmax in `dtype`,
    the confidence kept in it (a threshold is compared in that dtype, as the references do)."""
    z, mask_id = logits.to(dtype), lm.mask_token_id
    if not lm.family.mask_in_softmax:  # ours drop the mask's logit; the three references keep it
        z = z.clone()
        z[:, mask_id] = float("-inf")
    probs = torch.softmax(z, dim=-1)
    ranked = (probs if dtype == logits.dtype else logits.float()).clone()  # bfloat16: argmax of probs
    ranked[:, mask_id] = float("-inf")  # the mask is never a prediction (as our decoder)
    tok = ranked.argmax(dim=-1)
    return tok, probs.gather(1, tok[:, None])[:, 0]


def _step(lm, x: list[int], logits: torch.Tensor, threshold: float, dtype: torch.dtype,
          share: int) -> tuple[torch.Tensor, list[int]]:
    """One reference denoise step on the block `x`: (tokens, the positions it commits)."""
    tok, conf = _rule(lm, logits, dtype)
    return tok, _commits(lm, x, conf, threshold, share)


def _commits(lm, x: list[int], conf: torch.Tensor, threshold: float, share: int) -> list[int]:
    """The positions a step commits: masked ones (Fast-dLLM v2: in the first sub-block holding
    one) whose confidence is above the threshold, compared in the confidence's dtype as the
    references do; at least `share` (LLaDA2's schedule; else 1), the most confident first."""
    live = [i for i in range(len(x)) if x[i] == lm.mask_token_id]
    if lm.family.sub_block:
        lo = live[0] // lm.family.sub_block * lm.family.sub_block
        live = [i for i in live if i < lo + lm.family.sub_block]
    keep = torch.zeros(len(x), dtype=torch.bool)
    keep[live] = True
    conf = torch.where(keep, conf, torch.tensor(float("-inf"), dtype=conf.dtype))
    high = torch.nonzero(conf > threshold).flatten().tolist()
    if len(high) < share:
        high = conf.double().topk(min(share, len(live))).indices.tolist()
    return high


def _block_logits(lm, x: list[int]) -> torch.Tensor:
    logits = _forward(lm.model, x)
    return torch.cat([logits[:1], logits[:-1]]) if lm.family.shifted_logits else logits


def _reference(lm, prompt: list[int], *, block: int, budget: int, threshold: float,
               dtype: torch.dtype):
    """One block of the family's reference generate: (ids cut after the first stop, the masked
    flags after the first step)."""
    mask_id, fam = lm.mask_token_id, lm.family
    n = len(prompt)
    x = list(prompt) + [mask_id] * (block - n)
    steps = min(fam.steps or block, budget)
    base, extra = divmod(block, steps)
    schedule = [base + (i < extra) for i in range(steps)] if fam.steps else [1] * steps
    first, step = None, 0
    while any(t == mask_id for t in x[n:n + budget]):  # later positions change nothing after
        tok, high = _step(lm, x, _block_logits(lm, x), threshold, dtype,
                          schedule[min(step, steps - 1)])
        for i in high:
            x[i] = int(tok[i])
        first = first or [x[i] == mask_id for i in range(n, block)]
        step += 1
    out = x[n:n + budget]
    stops = [i for i, t in enumerate(out) if t in (fam.stop_ids or lm.eos_token_ids)]
    return (out[:stops[0] + 1] if stops else out), first


def _prompt(n: int, lm) -> list[int]:
    """n ordinary ids: the released-config checkpoints' ACTIVE ones, else the tiny vocabulary's."""
    ids = ACTIVE if lm.model.get_output_embeddings().weight.shape[0] > ACTIVE[-1] else range(20, 250)
    g = torch.Generator().manual_seed(50 + n)
    return [ids[i] for i in torch.randint(0, len(ids), (n,), generator=g).tolist()]


def _other(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype == torch.bfloat16 else torch.bfloat16


def _split_threshold(lm, prompt: list[int], block: int, budget: int,
                     dtype: torch.dtype) -> float:
    """A threshold at which the first step commits other positions in the family's dtype than
    in the other one (float32 for a bfloat16 family, bfloat16 else): one of the first step's
    own confidences, where the other dtype rounds that position's the other way."""
    x = list(prompt) + [lm.mask_token_id] * (block - len(prompt))
    share = 1 if not lm.family.steps else -(-block // min(lm.family.steps, budget))
    return _split_at(lm, x, _block_logits(lm, x), len(prompt), share, dtype)


def _split_at(lm, x: list[int], logits: torch.Tensor, fixed: int, share: int,
              dtype: torch.dtype) -> float:
    """The split threshold of one step on the block `x` (its first `fixed` positions prompt)."""
    own = _rule(lm, logits, dtype)[1]
    alt = _rule(lm, logits, _other(dtype))[1]
    for t in sorted({float(c) for c in torch.cat([own[fixed:].float(), alt[fixed:].float()])}):
        if _commits(lm, x, own, t, share) != _commits(lm, x, alt, t, share):
            return t
    raise AssertionError("no threshold splits the dtypes on this checkpoint")


def test_one_block_equals_the_reference_in_its_dtype(family):
    name, lm = family
    _, _, _, block, n, budget, dtype = CASES[name]
    prompt = _prompt(n, lm)
    threshold = _split_threshold(lm, prompt, block, budget, dtype)
    events = list(Engine(lm).stream(prompt, GenerationConfig(max_new_tokens=budget, threshold=threshold,
                                                              block_size=block)))
    ours = next(e for e in events if isinstance(e, GenerationResult))
    first = next(e for e in events if isinstance(e, DenoiseStep))
    ref, ref_first = _reference(lm, prompt, block=block, budget=budget, threshold=threshold,
                                dtype=dtype)
    assert list(first.masked) == ref_first[:len(first.masked)]  # the step the dtypes split on
    assert list(ours.token_ids) == ref


@pytest.mark.parametrize("kind", ["ar", "ar_llama"])
def test_ar_equals_transformers_greedy_generate_in_bfloat16(tiny_dirs, kind):
    """AR decoding takes the argmax of the logits, which their float32 upcast keeps (no
    confidence): in bfloat16 on transformers' own network, ids equal its greedy `generate`."""
    lm = load_model(str(tiny_dirs[kind]), dtype="bfloat16", native=False)
    assert next(lm.model.parameters()).dtype == torch.bfloat16
    for text in ("def add(a, b):\n    return", "Hello there, how"):
        prompt = lm.encode(text)
        ours = Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=24))
        with torch.inference_mode():
            ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                    eos_token_id=list(lm.eos_token_ids), pad_token_id=0)
        assert list(ours.token_ids) == ref[0, len(prompt):].tolist()


# Across blocks, against references that keep the KV cache as the released generates do
# (references_cached.py: SDAR's `block_diffusion_generate`, Fast-dLLM v2's `batch_sample`), on
# transformers' own network, so every forward of ours has the reference's shape: the prompt's
# whole blocks in one prefill forward, each denoise step one block against the cache, the
# finished block one forward that stores it. Our commit is not fused with the next block's
# first step here (Engine(fuse_commit=False)), as those generates run them as two forwards;
# Fast-dLLM v2 never fuses (its first-token rule reads the commit's last row).
# family -> (released config, transformers type, stop ids, eos boost, block, cases: (prompt
#   length, budget, {output index: a stop forced there} or None: stops never chosen))
ACROSS = {
    "sdar": ("sdar_1.7b_chat.json", "qwen3", (151643, 151645), 2.5, 4,
             [(1, 14, None), (6, 14, None), (9, 23, {13: 151645})]),
    "fast_dllm_v2": ("fast_dllm_v2_1.5b.reconstructed.json", "qwen2", (151645, 151643), 1.3, 32,
                     [(10, 80, None), (40, 90, {70: 151645})]),
    # ours (no released generate): the cache our decoder keeps, on transformers' qwen3_next
    # network; the suite's tiny checkpoint (tests/conftest.py), its EOS ids the stops
    "hybrid": (None, "hybrid", None, None, 8, [(3, 30, None), (10, 30, {14: None})]),
}


@pytest.fixture(scope="module", params=[pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                        for n in sorted(ACROSS)])
def across(request, tmp_path_factory, tiny_dirs):
    name = request.param
    cfg, hf_type, stops, boost, *_ = ACROSS[name]
    if cfg is None:
        return name, load_model(str(tiny_dirs[hf_type]), dtype="bfloat16")  # transformers' network
    path = build(released(cfg), tmp_path_factory.mktemp(name) / "m", hf_type=hf_type, stop_ids=stops,
                 eos_boost=boost)
    return name, load_model(str(path), dtype="bfloat16", native=False)  # transformers' network


def _split_after_prefill(lm, prompt: list[int], block: int, dtype: torch.dtype) -> float:
    """The split threshold (as _split_threshold) of the first decode step as the cached
    reference runs it: the prompt's whole blocks prefilled, then its first decode block."""
    n, lo = len(prompt), len(prompt) // block * block
    net = CachedNet(lm.model, block)
    if lo:
        net.run(prompt[:lo], 0, store=True)
    x = prompt[lo:] + [lm.mask_token_id] * (block - (n - lo))
    logits = net.run(x, lo, store=False)
    if lm.family.shifted_logits:
        logits = torch.cat([logits[:1], logits[:-1]])
    return _split_at(lm, x, logits, n - lo, 1, dtype)


def _cached_reference(name: str, lm, prompt: list[int], budget: int, threshold: float, trace: list):
    _, _, stops, _, block, _ = ACROSS[name]
    if name == "hybrid":
        return hybrid_generate_cached(lm.model, prompt, mask_id=lm.mask_token_id, gen_length=budget,
                                      block_length=block, threshold=threshold,
                                      stop_ids=set(lm.eos_token_ids), trace=trace)
    if name == "sdar":
        return sdar_generate_cached(lm.model, prompt, mask_id=lm.mask_token_id, gen_length=budget,
                                    block_length=block, threshold=threshold, stop_ids=set(stops),
                                    trace=trace)
    return fast_dllm_generate_cached(lm.model, prompt, mask_id=lm.mask_token_id, max_new_tokens=budget,
                                     block_size=block, small_block_size=lm.family.sub_block,
                                     threshold=threshold, stop_token=stops[0], trace=trace)


def test_half_precision_fuses_no_commit_where_the_release_runs_two_forwards(tiny_dirs):
    """SDAR's released generate runs a block's commit and the next block's first step as two
    forwards; in bfloat16 the fused forward rounds differently, so its row turns fusing off there
    (FamilyRow.fuse_in_half); in float32, and for families without that rule, the engine fuses."""
    for kind, dtype, fused in (("sdar", "bfloat16", False), ("sdar", "float32", True),
                               ("clover", "bfloat16", True)):
        lm = load_model(str(tiny_dirs[kind]), dtype=dtype)
        assert Engine(lm, cache_mb=0).fuse_commit is fused, (kind, dtype)
        assert Engine(lm, cache_mb=0, fuse_commit=not fused).fuse_commit is (not fused)


def test_blocks_equal_the_cache_keeping_reference(across):
    """Three blocks and more in bfloat16, id for id and step for step (every step's masked
    flags), with a threshold at which the first step's commits differ between a bfloat16 and a
    float32 softmax. Steer (steer.py) makes the endings hold by construction: stops never chosen
    (only the budget ends the run) or one forced at an output index (an EOS in a later block)."""
    name, lm = across
    _, _, stops, _, block, cases = ACROSS[name]
    stops = stops or tuple(lm.eos_token_ids)
    dtype = torch.bfloat16 if lm.family.row.confidence_dtype == "logits" else torch.float32
    shift = 1 if lm.family.shifted_logits else 0  # the row of p - 1 decides p (Fast-dLLM v2)
    for n, budget, force in cases:
        prompt = _prompt(n, lm)
        at = {n + i - shift: t or stops[0] for i, t in (force or {}).items()}
        with Steer(lm.model, stops, at):
            threshold = _split_after_prefill(lm, prompt, block, dtype)
            # SDAR: the engine's default (its row fuses no commit in half precision); the
            # hybrid, which has no released generate, unfused as the reference runs
            engine = Engine(lm) if name == "sdar" else Engine(lm, fuse_commit=False)
            assert not engine.fuse_commit
            events = list(engine.stream(prompt, GenerationConfig(
                max_new_tokens=budget, threshold=threshold, block_size=block), reuse=False))
            trace: list = []
            ref = _cached_reference(name, lm, prompt, budget, threshold, trace)
        ours = next(e for e in events if isinstance(e, GenerationResult))
        steps = [e.masked for e in events if isinstance(e, DenoiseStep)]
        assert list(ours.token_ids) == ref, (n, budget)
        assert steps == trace[:len(steps)] and len(steps) >= len(trace) - block, (n, budget)
        blocks = {e.block_index for e in events if isinstance(e, DenoiseStep)}
        assert len(blocks) >= 3  # the decode crossed at least two commits
        ends = ("eos", min(force) + 1) if force else ("length", budget)
        assert (ours.finish_reason, len(ref)) == ends
