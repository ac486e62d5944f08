"""The fit check with --quantize (engine/fit.py): quantized matrices counted at their format's bytes
(QUANTIZED_BYTES_PER_PARAM, scales included), the rest in the compute dtype; a refusal names the
formats that would fit."""
from __future__ import annotations

import json
import struct

import pytest

from clover_cli.engine.fit import QUANTIZED_BYTES_PER_PARAM, FitError, check_fit, engine_bytes, weight_size
from clover_cli.engine.loader import bundled_tiny_dir
from clover_cli.engine.placement import DTYPE_BYTES, Machine, Placement

GIB = 1 << 30


def _headers(directory, tensors: dict[str, tuple[int, int]]):
    """config.json and a safetensors header naming BF16 tensors (no data)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text((bundled_tiny_dir() / "config.json").read_text())
    header, offset = {}, 0
    for name, shape in tensors.items():
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + shape[0] * shape[1] * 2]}
        offset += shape[0] * shape[1] * 2
    raw = json.dumps(header).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    return directory


def test_the_formats_are_within_their_budget_against_bfloat16():
    assert QUANTIZED_BYTES_PER_PARAM["int8"] <= 0.55 * DTYPE_BYTES["bfloat16"]
    assert QUANTIZED_BYTES_PER_PARAM["int4"] <= 0.30 * DTYPE_BYTES["bfloat16"]


def test_quantized_size_counts_matrices_in_the_format_and_the_rest_in_the_dtype(tmp_path):
    d = _headers(tmp_path / "m", {"model.embed_tokens.weight": (1 << 16, 1 << 12),
                                  "model.layers.0.mlp.up_proj.weight": (1 << 18, 1 << 14)})
    size = weight_size(d)
    matrix = (1 << 18) * (1 << 14)
    assert size.matrix_params == matrix
    assert size.bytes_quantized("int4", "bfloat16") == int(matrix * QUANTIZED_BYTES_PER_PARAM["int4"]) \
        + 2 * (1 << 28)


def test_a_refusal_names_the_quantized_formats_that_fit_and_they_then_load(tmp_path):
    d = _headers(tmp_path / "m", {"model.layers.0.mlp.up_proj.weight": (1 << 20, 1 << 13)})  # 8 Gi params
    raw = json.loads((d / "config.json").read_text())
    here = Placement("cpu", "bfloat16", "CPU")
    machine = Machine(free_bytes={"cpu": 6 * GIB})  # 16 GiB in bfloat16, 8.3 in int8, 4.3 in int4
    with pytest.raises(FitError) as info:
        check_fit(d, raw, here, machine, "big")
    assert "--quantize int4" in str(info.value) and "--quantize int8" not in str(info.value)
    need = check_fit(d, raw, Placement("cpu", "bfloat16", "CPU", "int4"), machine, "big")
    assert need == weight_size(d).bytes_quantized("int4", "bfloat16") + engine_bytes(raw, here)
    with pytest.raises(FitError, match="needs 8.* in int8"):
        check_fit(d, raw, Placement("cpu", "bfloat16", "CPU", "int8"), machine, "big")
