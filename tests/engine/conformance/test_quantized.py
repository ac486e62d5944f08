"""`--quantize int8|int4` on every family (docs/engine.md, "Quantized weights").

For each family, a tiny checkpoint loaded quantized is checked three ways:
- its integers and scales stand for the full-precision weights: every quantized weight, dequantized,
  is within half a quantization step of the checkpoint's (catches a wrong scale, packing or
  layout, which the logit check below cannot see: it shares them);
- teacher-forced logits against a reference that runs the same integers and scales, dequantized,
  through the plain path (nn.Linear / the fused experts' loop; `dequantized_reference`): top-1
  identical at every position where the reference's top-2 margin exceeds MARGIN, and max |Δlogit|
  under MAX_DELTA (printed per family: `pytest -s`);
- what stays in the compute dtype does (output head, embeddings, routers, GDN gates).
"""
from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn

from clover_cli.engine.loader import load_model
from clover_cli.engine.quantize import QuantizedExperts, QuantizedLinear, dequantized_reference

MARGIN = 1e-3  # the reference's top-2 margin above which top-1 must agree
MAX_DELTA = 1e-3  # float32: the quantized and plain paths differ by rounding only
FORMATS = ("int8", "int4")
TINY_KINDS = ("clover", "sdar", "fast_dllm_v2", "ar", "hybrid")
REAL_KINDS = {"dream": ("dream_v0_instruct_7b.reconstructed.json", "qwen2"),
              "llada": ("llada_8b_instruct.json", "llada"),
              "llada2": ("llada2_mini.reconstructed.json", "llada2_moe")}
VOCAB, MASK = 2048, 2040


@pytest.fixture(scope="module")
def checkpoints(tiny_dirs, tmp_path_factory):
    """family -> checkpoint directory, each built the first time a test asks for it."""
    built: dict[str, object] = {}

    def get(kind: str):
        if kind not in built:
            built[kind] = _build(kind, tiny_dirs, tmp_path_factory.mktemp(kind) / "m")
        return built[kind]

    return get


def _build(kind: str, tiny_dirs, directory):
    if kind in TINY_KINDS:
        return tiny_dirs[kind]
    if kind in REAL_KINDS:  # the released config, its vocabulary shrunk (conformance/realcfg.py)
        from realcfg import build, released

        name, hf_type = REAL_KINDS[kind]
        raw = dict(released(name), vocab_size=VOCAB, mask_token_id=MASK)
        raw.update({k: VOCAB if k == "embedding_size" else 1500 for k in
                    ("embedding_size", "pad_token_id", "bos_token_id", "eos_token_id") if k in raw})
        if kind == "llada2":  # 256 experts of 512 at width 64 would be most of the test's time
            raw.update(num_experts=16, n_group=4, topk_group=2, num_experts_per_tok=4)
        return build(raw, directory, hf_type=hf_type, stop_ids=(1500,))
    if kind in ("qwen3_5_moe", "qwen3_next"):
        from hybrid_real import build

        return build(kind, directory)
    from gemma_tiny import build

    return build(directory, vocab=4096)


def _logits(family: str, model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if family == "diffusion_gemma":  # the prompt encoded, a canvas decoded against it
            return model(input_ids=ids[:, :6], decoder_input_ids=ids[:, 6:]).logits.float()
        return model(ids).logits.float()


def _ids(lm) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    return torch.randint(3, min(vocab, 1200), (1, 24), generator=g)


FAMILIES = [*TINY_KINDS, *REAL_KINDS, "qwen3_5_moe", "qwen3_next", "diffusion_gemma"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", FAMILIES)
def test_quantized_logits_equal_the_dequantized_reference(checkpoints, kind, fmt):
    path = checkpoints(kind)
    lm = load_model(str(path), dtype="float32", device="cpu", quantize=fmt)
    assert lm.placement.weight_format == fmt and lm.placement.label().endswith(f"· {fmt}")
    quantized = [m for m in lm.model.modules() if isinstance(m, (QuantizedLinear, QuantizedExperts))]
    assert quantized, "nothing was quantized"
    ids = _ids(lm)
    out = _logits(lm.family.name, lm.model, ids)
    ref = _logits(lm.family.name, dequantized_reference(copy.deepcopy(lm.model)), ids)
    top2 = ref.topk(2, dim=-1).values
    sure = (top2[..., 0] - top2[..., 1]) > MARGIN
    delta = (out - ref).abs().max().item()
    print(f"{kind} {fmt}: max |Δlogit| {delta:.2e}, {int(sure.sum())}/{sure.numel()} positions checked")
    assert torch.equal(out.argmax(-1)[sure], ref.argmax(-1)[sure])
    assert delta < MAX_DELTA


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["clover", "llada", "llada2", "qwen3_5_moe", "diffusion_gemma"])
def test_integers_and_scales_stand_for_the_checkpoint(checkpoints, kind, fmt):
    """Every quantized weight, dequantized, is within half a step of the full-precision one; the
    output head, embeddings, norms, routers and GDN gates are the full-precision tensors."""
    path = checkpoints(kind)
    full = load_model(str(path), dtype="float32", device="cpu", quantize="none").model
    quant = load_model(str(path), dtype="float32", device="cpu", quantize=fmt).model
    plain = dict(full.named_modules())
    checked = 0
    for name, module in quant.named_modules():
        if isinstance(module, QuantizedLinear):
            pairs = [(module.dequantized(torch.float32), plain[name].weight, module.scale)]
        elif isinstance(module, QuantizedExperts):
            pairs = [(module.weight(n, e, torch.float32), getattr(plain[name], n)[e],
                      getattr(module, f"{n}_scale")[e])
                     for n in ("gate_up_proj", "down_proj") for e in range(module.num_experts)]
        else:
            continue
        for deq, w, scale in pairs:
            step = scale.repeat_interleave(w.shape[-1] // scale.shape[-1], dim=-1)
            assert ((deq - w).abs() <= step * 0.5 + 1e-6).all(), name
            assert (deq - w).abs().max() > 0 or w.abs().max() == 0  # really quantized
            checked += 1
    assert checked
    for name, module in quant.named_modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):  # kept: bitwise the checkpoint's
            assert torch.equal(module.weight, plain[name].weight), name
    head = quant.get_output_embeddings()
    assert isinstance(head, nn.Linear) and not isinstance(head, QuantizedLinear)


def test_our_networks_never_hold_the_full_precision_matrices(checkpoints):
    """Our own modules quantize each Linear as it is read: none keeps a float weight."""
    lm = load_model(str(checkpoints("llada2")), dtype="float32", device="cpu", quantize="int4")
    floats = [n for n, p in lm.model.named_parameters() if p.dim() == 2 and "experts" in n]
    assert not floats
    sizes = {n: b.dtype for n, b in lm.model.named_buffers() if n.endswith("qweight")}
    assert sizes and set(sizes.values()) == {torch.uint8}


def test_quantize_choice_from_the_environment_and_refused_values(monkeypatch, tiny_dirs):
    from clover_cli.engine.loader import ModelLoadError

    monkeypatch.setenv("CLOVER_QUANTIZE", "int8")
    assert load_model(str(tiny_dirs["clover"]), device="cpu").placement.weight_format == "int8"
    assert load_model(str(tiny_dirs["clover"]), device="cpu", quantize="none").placement.weight_format == ""
    with pytest.raises(ModelLoadError, match="quantize must be int8, int4 or none"):
        load_model(str(tiny_dirs["clover"]), device="cpu", quantize="int3")


def test_the_cli_shows_the_format(clover, tiny_dirs):
    ran = clover("generate", "--model", str(tiny_dirs["clover"]), "--prompt", "hi", "--quantize", "int4",
                 "--max-new-tokens", "8", "--json")
    assert ran.exit_code == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["weight_format"] == "int4" and out["token_ids"]
    ran = clover("generate", "--model", str(tiny_dirs["clover"]), "--prompt", "hi", "--max-new-tokens", "8",
                 "--quantize", "int8")
    assert ran.exit_code == 0 and "cpu · float32 · int8" in ran.stderr, ran.stderr


def _torchao_oracle():
    """torchao 0.18.0's quantization package and PerRow, imported from `.venv/oracles` (where
    scripts/setup-dev.sh installs it, off sys.path: installed in the venv, transformers would
    import it on every model load). A missing oracle fails the test rather than skipping it."""
    import importlib
    import sys
    from pathlib import Path

    oracles = Path(sys.prefix) / "oracles"
    if not (oracles / "torchao").is_dir():
        pytest.fail(f"{oracles / 'torchao'} is missing: bash scripts/setup-dev.sh installs torchao there")
    sys.path.insert(0, str(oracles))
    try:
        quantization = importlib.import_module("torchao.quantization")
        granularity = importlib.import_module("torchao.quantization.granularity")
    finally:
        sys.path.remove(str(oracles))
    return quantization, granularity.PerRow


def test_int8_integers_and_scales_are_torchaos():
    """Our int8 is torchao's Int8WeightOnlyConfig scheme, bit for bit (float32 and bfloat16)."""
    torchao, PerRow = _torchao_oracle()

    from clover_cli.engine.quantize import quantize_int8

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        w = (torch.randn(3, 96, 200, generator=g) * 0.05).to(dtype)
        w[0, 0] = 0  # an all-zero row: the eps floor
        ours = quantize_int8(w)
        theirs = torchao.Int8Tensor.from_hp(w, PerRow())
        assert torch.equal(ours[0], theirs.qdata) and torch.equal(ours[1], theirs.scale.float())
