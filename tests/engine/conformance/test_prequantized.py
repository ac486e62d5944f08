"""Pre-quantized checkpoints (engine/prequantized.py): compressed-tensors W4A16 / W8A16 load as
their own integers and scales, FP8 weights dequantize with one notice, other formats are refused
with one line naming what loads. The checkpoints are written by compressed-tensors itself
(ct_build.py) from the tiny block-diffusion checkpoint."""
from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch

from clover_cli.engine.loader import ModelLoadError, load_model
from clover_cli.engine.quantize import QuantizedLinear, dequantized_reference, unpack_int4

pytest.importorskip("compressed_tensors")


@pytest.fixture(scope="module")
def built(tiny_dirs, tmp_path_factory):
    from ct_build import build

    root = tmp_path_factory.mktemp("prequantized")
    src = tiny_dirs["clover"]
    return {"src": src, **{s: build(src, root / s, s) for s in ("w4a16", "w8a16", "fp8")}}


@pytest.mark.parametrize("scheme,fmt", [("w4a16", "int4"), ("w8a16", "int8")])
def test_integers_and_scales_are_the_checkpoints(built, scheme, fmt):
    """Our integers are the ones compressed-tensors unpacks, our scales its scales, and the
    dequantized weights what transformers + compressed-tensors decompress (to bfloat16 rounding)."""
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    lm = load_model(str(built[scheme]), device="cpu", dtype="float32")
    assert lm.placement.weight_format == fmt and lm.placement.label() == f"cpu · float32 · {fmt}"
    stored = load_file(str(built[scheme] / "model.safetensors"))
    with pytest.warns(UserWarning):
        theirs = AutoModelForCausalLM.from_pretrained(str(built[scheme]), dtype=torch.float32,
                                                      quantization_config=CompressedTensorsConfig(dequantize=True))
    dense = dict(theirs.named_modules())
    mods = [(n, m) for n, m in lm.model.named_modules() if isinstance(m, QuantizedLinear)]
    assert len(mods) == 7 * lm.model.c.num_hidden_layers  # every Linear but the head
    for name, m in mods:
        if fmt == "int4":
            q = unpack_from_int32(stored[f"{name}.weight_packed"], 4, (m.out_features, m.in_features))
            assert torch.equal(unpack_int4(m.qweight), q.to(torch.int8))
        else:
            assert torch.equal(m.qweight, stored[f"{name}.weight"])
        assert torch.equal(m.scale, stored[f"{name}.weight_scale"].float().reshape(m.scale.shape))
        w = dense[name].weight.float()
        assert ((m.dequantized(torch.float32) - w).abs() <= w.abs() * 2 ** -8 + 1e-6).all(), name


@pytest.mark.parametrize("scheme", ["w4a16", "w8a16"])
def test_logits_equal_the_dequantized_reference(built, scheme):
    lm = load_model(str(built[scheme]), device="cpu", dtype="float32")
    ids = torch.randint(3, 300, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = lm.model(ids).logits
        ref = dequantized_reference(copy.deepcopy(lm.model))(ids).logits
    top2 = ref.topk(2, dim=-1).values
    sure = (top2[..., 0] - top2[..., 1]) > 1e-3
    assert torch.equal(out.argmax(-1)[sure], ref.argmax(-1)[sure]) and (out - ref).abs().max() < 1e-3


def test_fp8_weights_dequantize_with_one_notice(built, capfd):
    from clover_cli.engine import prequantized

    prequantized._NOTICED.clear()
    lm = load_model(str(built["fp8"]), device="cpu", dtype="float32")
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if "FP8" in line] == [
        "clover: note: FP8 weights are dequantized on load (no FP8 matmul here); they take the compute "
        "dtype's memory"]
    assert lm.placement.weight_format == "" and not any(isinstance(m, QuantizedLinear) for m in lm.model.modules())
    full = load_model(str(built["src"]), device="cpu", dtype="float32")
    w, w0 = lm.model.model.layers[0].mlp.up_proj.weight, full.model.model.layers[0].mlp.up_proj.weight
    assert (w - w0).abs().max() <= w0.abs().max() / 8  # e4m3: 3 mantissa bits
    int8 = load_model(str(built["fp8"]), device="cpu", dtype="float32", quantize="int8")
    assert int8.placement.weight_format == "int8"  # FP8 then --quantize: quantized from the dequantized


@pytest.mark.parametrize("quant", [
    {"quant_method": "gptq", "bits": 4, "group_size": 128},
    {"quant_method": "awq", "bits": 4, "version": "gemm"},
    {"quant_method": "bitsandbytes", "load_in_4bit": True},
    {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group"}}}},
    {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int"}}}},
])
def test_other_formats_are_refused_in_one_line_naming_what_loads(built, tmp_path, quant):
    d = tmp_path / "q"
    shutil.copytree(built["w4a16"], d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, "quantization_config": quant}))
    with pytest.raises(ModelLoadError) as info:
        load_model(str(d), device="cpu")
    message = str(info.value)
    assert "\n" not in message and "compressed-tensors W4A16 (pack-quantized)" in message and "FP8" in message


def test_a_family_transformers_runs_is_refused_in_one_line(built, tmp_path):
    with pytest.raises(ModelLoadError, match="engine's own networks only"):
        load_model(str(built["w4a16"]), device="cpu", native=False)


def test_generate_decodes_a_w4a16_directory(built, clover):
    ran = clover("generate", "--model", str(built["w4a16"]), "--prompt", "hi", "--max-new-tokens", "8", "--json")
    assert ran.exit_code == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["weight_format"] == "int4" and out["token_ids"]
