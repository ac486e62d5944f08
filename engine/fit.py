"""Fit before load: does a checkpoint fit the device it is about to be loaded on?

Before any tensor is read, the weights' bytes in the chosen dtype are summed from the safetensors
headers (the first 8 + N bytes of each file; the index names the shards), the engine's own need is
added (a KV cache for a working window, the logits of a fused step, the runtime), and the total is
held against the device's free memory: `torch.cuda.mem_get_info` on CUDA, MemAvailable (and the
cgroup's limit) on the CPU. What does not fit is one line saying what is needed, what is free and
what would fit (another device, a smaller dtype, a quantized format). docs/engine.md, "Placement".

`CLOVER_FIT_CHECK=0` skips the refusal (the estimate is then only printed as a warning).
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .placement import DTYPE_BYTES, Machine, Placement, PlacementError

FIT_ENV = "CLOVER_FIT_CHECK"
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit on a header
WORKING_WINDOW = 8192  # tokens of KV cache counted as the engine's need
RUNTIME_BYTES = {"cuda": 600 << 20, "mps": 400 << 20, "cpu": 300 << 20}  # CUDA context, allocator slack
# Safetensors dtypes that are weights in the compute dtype (re-cast on load); others keep their size.
_FLOAT = {"F64", "F32", "F16", "BF16"}
_STORED_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U32": 4, "I16": 2,
                 "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
# Quantized weight formats a fit message may name, as bytes per parameter of a quantized matrix
# including its float32 scales (engine/quantize.py): int8 one scale per row (<= 4/128 bytes for a
# row of 128+), int4 one per group of 128. The rest (embeddings, output head, norms) stays in the
# compute dtype.
QUANTIZED_BYTES_PER_PARAM: dict[str, float] = {"int8": 1.0 + 4 / 128, "int4": 0.5 + 4 / 128}
# tensors that stay in the compute dtype under --quantize: embeddings and output heads by name,
# and every vector (norms, biases)
_UNQUANTIZED_NAMES = ("embed", "lm_head", "wte", "word_embeddings", "transformer.ff_out", "router", "gate.")


class FitError(PlacementError):
    """The model does not fit the chosen device; str() is one line naming what would."""


@dataclass(frozen=True)
class WeightSize:
    """A checkpoint's weights as its headers describe them."""

    params: int  # elements of floating-point tensors (re-cast to the compute dtype)
    fixed_bytes: int  # bytes of tensors kept as stored (integer / packed / FP8)
    matrix_params: int = 0  # of params, those --quantize quantizes (matrices but embeddings / heads)

    def bytes_in(self, dtype: str) -> int:
        return self.params * DTYPE_BYTES[dtype] + self.fixed_bytes

    def bytes_quantized(self, fmt: str, dtype: str = "bfloat16") -> int:
        """Quantized matrices in `fmt`, the rest in the compute `dtype`."""
        rest = (self.params - self.matrix_params) * DTYPE_BYTES.get(dtype, 2)
        return int(self.matrix_params * QUANTIZED_BYTES_PER_PARAM[fmt]) + rest + self.fixed_bytes


def _header(path: Path) -> dict:
    """The JSON header of one safetensors file (no tensor data is read)."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path.name}: not a safetensors file (shorter than 8 bytes)")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER_BYTES:
            raise ValueError(f"{path.name}: not a safetensors file (header of {size} bytes)")
        return json.loads(fh.read(size))


def _weight_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            names = []
        files = [directory / n for n in names if (directory / n).is_file()]
        if files:
            return files
    return sorted(directory.glob("*.safetensors"))


def weight_size(directory: Path) -> WeightSize:
    """Sum the tensors named in a checkpoint's safetensors headers; ValueError for a bad header."""
    params = fixed = matrix = 0
    for path in _weight_files(Path(directory)):
        try:
            header = _header(path)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path.name}: unreadable safetensors header ({exc.__class__.__name__})") from None
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            count = 1
            for dim in info.get("shape", ()):
                count *= int(dim)
            kind = str(info.get("dtype", ""))
            if kind in _FLOAT:
                params += count
                if len(info.get("shape", ())) >= 2 and not any(n in name for n in _UNQUANTIZED_NAMES):
                    matrix += count
            else:
                fixed += count * _STORED_BYTES.get(kind, 1)
    return WeightSize(params, fixed, matrix)


def _text(raw: dict) -> dict:
    text = raw.get("text_config")
    return {**raw, **text} if isinstance(text, dict) else raw


def engine_bytes(raw: dict, placement: Placement) -> int:
    """What the engine needs beside the weights: the KV cache of a working window (attention layers
    only; GDN layers hold a fixed state), two blocks of float32 logits, the runtime."""
    cfg = _text(raw)
    try:
        layers = int(cfg.get("num_hidden_layers") or cfg.get("num_layers") or 0)
        heads = int(cfg.get("num_attention_heads") or 1)
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or int(cfg.get("hidden_size") or 0) // max(heads, 1))
        vocab = int(cfg.get("vocab_size") or 0)
    except (TypeError, ValueError):
        layers = kv_heads = head_dim = vocab = 0
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        layers = sum(1 for k in kinds if "full" in str(k) or "attention" == str(k))
    window = min(int(cfg.get("max_position_embeddings") or WORKING_WINDOW), WORKING_WINDOW)
    width = DTYPE_BYTES.get(placement.dtype, 4)
    kv = 2 * layers * kv_heads * head_dim * window * width
    logits = 2 * 64 * vocab * 4
    return kv + logits + RUNTIME_BYTES.get(placement.kind, RUNTIME_BYTES["cpu"])


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """What this process's cgroup (v2) still allows, when it sets a limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        return max(0, int(limit) - used)
    except (OSError, ValueError):
        return None


def free_bytes(device: str, machine: Machine | None = None) -> int | None:
    """Free memory of a device now (None: unknown). A Machine's `free_bytes` wins (tests)."""
    if machine is not None and device in machine.free_bytes:
        return machine.free_bytes[device]
    kind = device.split(":")[0]
    if kind == "cuda":
        import torch

        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, AssertionError):
            return None
    if kind == "mps":
        import torch

        try:
            return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
        except (AttributeError, RuntimeError):
            return None
    room = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return min(room) if room else None


def gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def _alternatives(size: WeightSize, raw: dict, placement: Placement, machine: Machine) -> list[str]:
    """What would fit instead, best first: a smaller dtype here, a quantized format here, another
    device in its default precision."""
    options: list[tuple[str, Placement, int]] = []
    here = placement.kind
    smaller = ["float16"] if here == "mps" else ["bfloat16"] if here == "cpu" else []
    if placement.dtype == "float32" and here == "cuda":
        smaller = ["bfloat16"]
    for dtype in smaller:
        if DTYPE_BYTES[dtype] < DTYPE_BYTES.get(placement.dtype, 4):
            alt = Placement(placement.device, dtype, placement.device_name)
            options.append((f"--dtype {dtype}", alt, size.bytes_in(dtype)))
    for fmt in QUANTIZED_BYTES_PER_PARAM:
        options.append((f"--quantize {fmt}", placement, size.bytes_quantized(fmt, placement.dtype)))
    devices = [(f"cuda:{g.index}", g.name) for g in machine.cuda] + ([("mps", "Apple MPS")] if machine.mps else [])
    for name, label in devices + [("cpu", "CPU")]:
        if name == placement.device:
            continue
        for dtype in (("bfloat16" if name.startswith("cuda") else "float16" if name == "mps" else "float32"),
                      "bfloat16"):
            alt = Placement(name, dtype, label)
            options.append((f"--device {name}" + ("" if dtype != "bfloat16" or name != "cpu" else " --dtype bfloat16"),
                            alt, size.bytes_in(dtype)))
    fits = []
    for flag, alt, weights in options:
        need = weights + engine_bytes(raw, alt)
        free = free_bytes(alt.device, machine)
        if free is not None and need <= free and flag not in fits:
            fits.append(f"{flag} ({gib(need)})")
    return fits


def check_fit(directory: Path, raw: dict, placement: Placement, machine: Machine, name: str,
              *, size: WeightSize | None = None) -> int:
    """Raise FitError (one line) when the checkpoint in `placement` does not fit its device's free
    memory; returns the bytes needed. Unknown free memory passes (nothing to compare with)."""
    size = size or weight_size(directory)
    weights = (size.bytes_quantized(placement.weight_format, placement.dtype) if placement.weight_format
               in QUANTIZED_BYTES_PER_PARAM else size.bytes_in(placement.dtype))
    need = weights + engine_bytes(raw, placement)
    free = free_bytes(placement.device, machine)
    if free is None or need <= free:
        return need
    fits = _alternatives(size, raw, placement, machine)
    hint = ("it would fit with " + ", or ".join(fits[:3])) if fits else "nothing on this machine has room for it"
    message = (f"{name}: does not fit {placement.device} ({placement.device_name}): needs {gib(need)} "
               f"in {placement.weights} ({gib(weights)} of weights + {gib(need - weights)} for the engine), "
               f"{gib(free)} free; {hint} (CLOVER_FIT_CHECK=0 loads it anyway)")
    if os.environ.get(FIT_ENV, "").strip() in ("0", "false", "no", "off"):
        import sys

        print(f"clover: warning: {message}", file=sys.stderr)
        return need
    raise FitError(message)


def fit_before_download(repo: str, placement: Placement):
    """The fit check on a release's listed weight bytes, from its config's stored dtype (the
    headers are not here yet): a model that cannot fit is not downloaded."""
    from . import hub
    from .placement import probe_machine

    def check(snapshot: Path, weight_bytes: int) -> None:
        try:
            raw = json.loads((Path(snapshot) / "config.json").read_text())
        except (OSError, ValueError):
            return  # the load reports it, with the rest
        text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
        stored = str(raw.get("torch_dtype") or raw.get("dtype") or text.get("torch_dtype") or "bfloat16")
        size = WeightSize(weight_bytes // DTYPE_BYTES.get(stored, 2), 0)
        try:
            check_fit(snapshot, raw, placement, probe_machine(), f"hf:{repo}", size=size)
        except PlacementError as exc:
            raise hub.HubError(f"{exc}; the weights were not downloaded") from None

    return check
