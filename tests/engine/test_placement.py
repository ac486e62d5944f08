"""Device and precision chosen from the machine, and the fit check before any tensor is read.

The machine is given as a `Machine` (the accelerators and free memory torch would report), so
CUDA and MPS are exercised on a CPU-only box; the fit refusal is also proved end to end with a
checkpoint whose header claims more weights than this machine has memory (its tensor data does
not even exist: the check reads headers only).
"""
import json
import struct
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from clover_cli.engine.fit import FitError, check_fit, engine_bytes, weight_size
from clover_cli.engine.loader import ModelLoadError, bundled_tiny_dir, load_model
from clover_cli.engine.placement import (CudaDevice, Machine, Placement, PlacementError, check_device_text,
                                         check_dtype_text, resolve_placement)

GIB = 1 << 30
ADA = CudaDevice(0, "NVIDIA GeForce RTX 5070 Ti", (12, 0), 16 * GIB)
TURING = CudaDevice(0, "Tesla T4", (7, 5), 16 * GIB)
CPU_ONLY = Machine(torch_version="2.13.0+cpu")


@pytest.mark.parametrize("machine, want", [
    (Machine(cuda=(ADA,), cuda_build="13.0"), ("cuda:0", "bfloat16")),
    (Machine(cuda=(TURING,), cuda_build="12.4"), ("cuda:0", "float16")),  # no bf16 matmuls before 8.0
    (Machine(mps=True), ("mps", "float16")),
    (Machine(cuda=(ADA,), mps=True, cuda_build="13.0"), ("cuda:0", "bfloat16")),  # CUDA before MPS
    (CPU_ONLY, ("cpu", "float32")),
])
def test_auto_picks_the_accelerator_and_its_precision(machine, want, monkeypatch):
    monkeypatch.delenv("CLOVER_DEVICE", raising=False)
    monkeypatch.delenv("CLOVER_DTYPE", raising=False)
    got = resolve_placement("auto", "auto", machine)
    assert (got.device, got.dtype) == want


def test_explicit_choices_win_over_auto():
    machine = Machine(cuda=(ADA, CudaDevice(1, "NVIDIA A100", (8, 0))), cuda_build="13.0")
    assert resolve_placement("cpu", "auto", machine) == Placement("cpu", "float32", "CPU")
    assert resolve_placement("cpu", "bfloat16", machine).dtype == "bfloat16"
    second = resolve_placement("cuda:1", "float16", machine)
    assert (second.device, second.dtype, second.device_name) == ("cuda:1", "float16", "NVIDIA A100")


@pytest.mark.parametrize("device, dtype, machine, words", [
    ("cuda", "auto", CPU_ONLY, ["no CUDA GPU", "CPU-only build", "--device auto or cpu"]),
    ("cuda", "auto", Machine(cuda_build="13.0"), ["no CUDA GPU", "CUDA_VISIBLE_DEVICES"]),
    ("cuda:2", "auto", Machine(cuda=(ADA,), cuda_build="13.0"), ["1 CUDA device", "cuda:0..cuda:0"]),
    ("mps", "auto", CPU_ONLY, ["no MPS device"]),
    ("cuda", "bfloat16", Machine(cuda=(TURING,), cuda_build="12.4"), ["Tesla T4", "7.5", "--dtype float16"]),
])
def test_a_choice_the_machine_cannot_honour_is_one_line(device, dtype, machine, words):
    with pytest.raises(PlacementError) as info:
        resolve_placement(device, dtype, machine)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_texts_are_checked_and_normalised():
    assert check_device_text(" CUDA:1 ") == "cuda:1"
    assert check_dtype_text("bf16") == "bfloat16" and check_dtype_text("fp16") == "float16"
    for bad in ("gpu", "cuda:", "cuda:x", "tpu"):
        with pytest.raises(PlacementError):
            check_device_text(bad)
    with pytest.raises(PlacementError):
        check_dtype_text("int4")


def test_the_environment_is_used_when_nothing_is_given(monkeypatch):
    machine = Machine(cuda=(ADA,), cuda_build="13.0")
    monkeypatch.setenv("CLOVER_DEVICE", "cpu")
    monkeypatch.setenv("CLOVER_DTYPE", "bfloat16")
    assert resolve_placement(None, None, machine) == Placement("cpu", "bfloat16", "CPU")
    assert resolve_placement("cuda", None, machine).device == "cuda:0"  # a given value wins


def test_the_loaded_model_carries_its_placement():
    lm = load_model("tiny", device="cpu", dtype="bfloat16")
    assert lm.placement == Placement("cpu", "bfloat16", "CPU")
    assert next(lm.model.parameters()).dtype == torch.bfloat16
    assert lm.placement.label() == "cpu · bfloat16"
    with pytest.raises(ModelLoadError, match="no CUDA GPU"):
        load_model("tiny", device="cuda")


# ---- fit before load --------------------------------------------------------------------------

def test_weight_size_counts_every_tensor_from_the_headers():
    directory = bundled_tiny_dir()
    tensors = {}
    for path in directory.glob("*.safetensors"):
        tensors.update(load_file(str(path)))
    size = weight_size(directory)
    assert size.params == sum(t.numel() for t in tensors.values() if t.is_floating_point())
    assert size.bytes_in("bfloat16") == 2 * size.params + size.fixed_bytes
    assert size.bytes_in("float32") == 4 * size.params + size.fixed_bytes


def _header_only_checkpoint(directory, shape=(1 << 20, 1 << 14), dtype="BF16", extra=None):
    """A config and a safetensors file whose header names one huge tensor and holds no data."""
    directory.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((bundled_tiny_dir() / "config.json").read_text())
    cfg.update(extra or {})
    (directory / "config.json").write_text(json.dumps(cfg))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = bundled_tiny_dir() / name
        if src.is_file():
            (directory / name).write_bytes(src.read_bytes())
    header = json.dumps({"model.embed_tokens.weight": {"dtype": dtype, "shape": list(shape),
                                                      "data_offsets": [0, shape[0] * shape[1] * 2]}}).encode()
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return directory


def test_fit_refusal_names_need_free_and_what_would_fit(tmp_path):
    directory = _header_only_checkpoint(tmp_path / "big", shape=(1 << 20, 4096))  # 4 Gi params
    raw = json.loads((directory / "config.json").read_text())
    size = weight_size(directory)
    assert size.params == 1 << 32
    machine = Machine(cuda=(ADA,), cuda_build="13.0",
                      free_bytes={"cuda:0": 6 * GIB, "cpu": 20 * GIB})
    here = Placement("cuda:0", "bfloat16", ADA.name)  # 8 GiB of weights on a 6 GiB card
    with pytest.raises(FitError) as info:
        check_fit(directory, raw, here, machine, "hf:org/big")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("hf:org/big: does not fit cuda:0")
    assert "needs 8." in message and "6.0 GiB free" in message
    assert "--device cpu" in message  # 16 GiB in float32 + the engine fit the CPU's 20 GiB
    assert "CLOVER_FIT_CHECK=0" in message
    roomy = Machine(cuda=(ADA,), cuda_build="13.0", free_bytes={"cuda:0": 15 * GIB, "cpu": 1 * GIB})
    need = check_fit(directory, raw, here, roomy, "hf:org/big")
    assert need == size.bytes_in("bfloat16") + engine_bytes(raw, here)


def test_fit_suggests_a_smaller_dtype_on_the_cpu(tmp_path):
    directory = _header_only_checkpoint(tmp_path / "big", shape=(1 << 20, 4096))
    raw = json.loads((directory / "config.json").read_text())
    machine = Machine(free_bytes={"cpu": 12 * GIB})  # 16 GiB in float32, 8 GiB in bfloat16
    with pytest.raises(FitError, match=r"it would fit with --dtype bfloat16 \(8\.\d GiB\)"):
        check_fit(directory, raw, Placement("cpu", "float32"), machine, "big")
    tiny = Machine(free_bytes={"cpu": 1 * GIB})
    with pytest.raises(FitError, match="nothing on this machine has room for it"):
        check_fit(directory, raw, Placement("cpu", "float32"), tiny, "big")


def test_the_engine_need_counts_attention_layers_only():
    raw = {"num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "vocab_size": 100, "max_position_embeddings": 1 << 20}
    plain = engine_bytes(raw, Placement("cpu", "float32"))
    hybrid = engine_bytes({**raw, "layer_types": ["linear_attention"] * 6 + ["full_attention"] * 2},
                          Placement("cpu", "float32"))
    kv_per_layer = 2 * 2 * 16 * 8192 * 4
    assert plain - hybrid == 6 * kv_per_layer


def test_loading_a_model_that_does_not_fit_is_refused_before_reading_a_tensor(tmp_path):
    # 2^40 parameters: more than any machine running this suite has; the file holds no data at all,
    # so reading a tensor would fail with another error
    directory = _header_only_checkpoint(tmp_path / "huge", shape=(1 << 26, 1 << 14))
    with pytest.raises(ModelLoadError) as info:
        load_model(str(directory), device="cpu")
    assert "does not fit cpu" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.slow
def test_generate_on_a_checkpoint_that_does_not_fit_exits_2_with_one_line(tmp_path):
    directory = _header_only_checkpoint(tmp_path / "huge", shape=(1 << 26, 1 << 14))
    done = subprocess.run([sys.executable, "-m", "clover_cli.cli", "generate", "--model", str(directory),
                           "--prompt", "hi"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not fit cpu" in lines[0] and "Traceback" not in done.stderr
