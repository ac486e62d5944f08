"""Checkpoints quantized before download (docs/engine.md, "Quantized weights").

What loads (`quantization_config` in config.json):
- `compressed-tensors` (what llm-compressor writes and vLLM / SGLang load) with integer weights,
  symmetric, activations unquantized: W4A16 `pack-quantized` (eight 4-bit values per int32,
  group-wise or per-channel scales) and W8A16 `int-quantized` / `naive-quantized` (int8 weights,
  per-channel or group-wise scales). The integers and scales become engine/quantize.py's
  QuantizedLinear as they are read, unchanged: a pack-quantized int32 word, little-endian, is
  exactly two of our bytes of low/high nibbles (both store q + 8), so nothing is requantized.
- FP8 weights (`compressed-tensors` `float-quantized`, or `quant_method: fp8` with block-wise
  `weight_scale_inv`): dequantized to the compute dtype while read, with one notice line on
  stderr — torch has no FP8 matmul on the CPU, and the engine none on CUDA yet.
Anything else (GPTQ, AWQ, bitsandbytes, GGUF k-quants in a safetensors directory, asymmetric or
activation-quantized integer schemes) is refused with one line naming what loads
(`describe` raises PrequantizedError).

Only the networks written here (engine/models/: Qwen / SDAR / Fast-dLLM v2 / Dream, LLaDA 1.x,
LLaDA2) load them; a pre-quantized checkpoint of a family transformers runs (DiffusionGemma, the
GDN hybrids, Llama) is refused with one line (engine/loader.py).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

LOADS = ("compressed-tensors W4A16 (pack-quantized) and W8A16 (int-quantized), "
         "or FP8 weights (dequantized on load)")


class PrequantizedError(ValueError):
    """A quantization_config the engine does not load; str() is one line."""


@dataclass(frozen=True)
class Prequantized:
    """What a checkpoint's quantization_config says about its weights."""

    kind: str  # "int4", "int8" or "fp8"
    method: str  # "compressed-tensors" or "fp8"

    @property
    def weight_format(self) -> str:
        """The Placement.weight_format it loads as ("" for FP8: dequantized to the compute dtype)."""
        return "" if self.kind == "fp8" else self.kind


def _refuse(what: str) -> PrequantizedError:
    return PrequantizedError(f"the checkpoint is quantized ({what}), which the engine does not load; "
                             f"it loads {LOADS} — or use the full-precision release with --quantize")


def describe(raw: dict[str, Any]) -> Prequantized | None:
    """The checkpoint's pre-quantization (None: it has none); PrequantizedError for one it
    does not load."""
    quant = raw.get("quantization_config")
    if not quant:
        return None
    if not isinstance(quant, dict):
        raise _refuse("an unreadable quantization_config")
    method = str(quant.get("quant_method", "unknown"))
    if method == "fp8":
        return Prequantized("fp8", method)
    if method != "compressed-tensors":
        raise _refuse(f"quant_method {method!r}")
    kinds = set()
    for name, group in (quant.get("config_groups") or {}).items():
        kinds.add(_group_kind(name, group, group.get("format") or quant.get("format")))
    if len(kinds) != 1:
        raise _refuse("compressed-tensors with " + ("no weight scheme" if not kinds else "mixed weight schemes"))
    return Prequantized(kinds.pop(), method)


def _group_kind(name: str, group: dict, fmt: Any) -> str:
    weights = group.get("weights") or {}
    bits, kind = weights.get("num_bits"), weights.get("type", "int")
    if kind == "float" and bits == 8:
        return "fp8"
    if group.get("input_activations") or group.get("output_activations"):
        raise _refuse(f"compressed-tensors {name}: quantized activations")
    if kind != "int" or not weights.get("symmetric", True) or bits not in (4, 8):
        raise _refuse(f"compressed-tensors {name}: {bits}-bit {kind}, "
                      f"{'symmetric' if weights.get('symmetric', True) else 'asymmetric'}")
    if weights.get("strategy", "channel") not in ("channel", "group"):
        raise _refuse(f"compressed-tensors {name}: {weights.get('strategy')} scales")
    ok = {4: ("pack-quantized",), 8: ("pack-quantized", "int-quantized", "naive-quantized")}[bits]
    if fmt not in ok:
        raise _refuse(f"compressed-tensors {name}: format {fmt!r} for {bits}-bit weights")
    return f"int{bits}"


def _headers(directory: Path) -> dict[str, tuple[Path, dict]]:
    from .fit import _header

    out = {}
    for file in sorted(directory.glob("*.safetensors")):
        for key, info in _header(file).items():
            if key != "__metadata__":
                out[key] = (file, info)
    return out


def quantized_modules(directory: Path, pq: Prequantized) -> dict[str, tuple[int, int, int]]:
    """Module name -> (out, in, groups) of every Linear the checkpoint stores as integers."""
    if pq.kind == "fp8":
        return {}
    found = {}
    for key, (_, info) in _headers(directory).items():
        if not key.endswith(".weight_scale"):
            continue
        prefix = key[: -len(".weight_scale")]
        n, groups = info["shape"] if len(info["shape"]) == 2 else (info["shape"][0], 1)
        found[prefix] = (n, int(groups))
    heads = _headers(directory)
    out = {}
    for prefix, (n, groups) in found.items():
        if prefix + ".weight_packed" in heads:
            per = 32 // int(pq.kind[3:])
            k = heads[prefix + ".weight_packed"][1]["shape"][1] * per
        elif prefix + ".weight" in heads:
            k = heads[prefix + ".weight"][1]["shape"][1]
        else:
            continue
        out[prefix] = (int(n), int(k), groups)
    return out


def reader(directory: Path, pq: Prequantized, dtype) -> Callable[[], Iterator[tuple[str, tuple, Callable]]]:
    """For read_weights: (key, shape, get) for every tensor the network expects, the quantized
    Linear weights as `NAME.weight` whose get() gives {NAME.qweight, NAME.scale} in
    engine/quantize.py's layout (FP8: the dequantized weight)."""
    modules = quantized_modules(directory, pq)

    def entries():
        from safetensors import safe_open

        handles = {}
        heads = _headers(directory)

        def tensor(key):
            file = heads[key][0]
            if file not in handles:
                handles[file] = safe_open(str(file), framework="pt")
            return handles[file].get_tensor(key)

        for key, (_, info) in heads.items():
            prefix, _, leaf = key.rpartition(".")
            if prefix in modules:
                if leaf in ("weight", "weight_packed"):
                    n, k, _ = modules[prefix]
                    yield prefix + ".weight", (n, k), lambda p=prefix, lf=leaf: _integers(tensor, p, lf, pq)
                continue
            if leaf in ("weight_scale", "weight_scale_inv", "weight_shape", "weight_zero_point", "input_scale"):
                continue
            if pq.kind == "fp8" and info.get("dtype", "").startswith("F8"):
                yield key, tuple(info["shape"]), lambda k=key: _fp8(tensor, k, heads, dtype)
                continue
            yield key, tuple(info["shape"]), lambda k=key: tensor(k)
    return entries


def _integers(tensor, prefix: str, leaf: str, pq: Prequantized) -> dict:
    import torch

    scale = tensor(prefix + ".weight_scale").to(torch.float32)
    q = tensor(prefix + "." + leaf)
    if leaf == "weight_packed" and pq.kind == "int4":  # int32 words: eight q + 8, lowest first
        q = q.contiguous().view(torch.uint8)  # little-endian: byte j holds values 2j (low), 2j + 1
    elif leaf == "weight_packed":  # 8-bit packed four per word: q + 128 per byte
        q = (q.contiguous().view(torch.uint8).to(torch.int16) - 128).to(torch.int8)
    if scale.dim() == 1:
        scale = scale[:, None]
    # copies: a view of the file's memory map would keep it mapped (engine/quantize.py tensor_transform)
    return {prefix + ".qweight": q.clone(), prefix + ".scale": scale.clone()}


_NOTICED: list[bool] = []


def _fp8(tensor, key: str, heads: dict, dtype):
    """An FP8 weight times its scale (per tensor / channel, or 128x128 blocks of scale_inv)."""
    import torch

    if not _NOTICED:
        _NOTICED.append(True)
        print("clover: note: FP8 weights are dequantized on load (no FP8 matmul here); they take "
              "the compute dtype's memory", file=sys.stderr)
    w = tensor(key).to(torch.float32)
    prefix = key.rpartition(".")[0]
    if prefix + ".weight_scale_inv" in heads:  # block-wise (quant_method fp8)
        s = tensor(prefix + ".weight_scale_inv").to(torch.float32)
        bn, bk = -(-w.shape[0] // s.shape[0]), -(-w.shape[1] // s.shape[1])
        s = s.repeat_interleave(bn, 0)[: w.shape[0]].repeat_interleave(bk, 1)[:, : w.shape[1]]
        return (w * s).to(dtype)
    if prefix + ".weight_scale" in heads:
        s = tensor(prefix + ".weight_scale").to(torch.float32)
        return (w * (s if s.dim() == 0 or s.numel() == 1 else s.reshape(-1, 1))).to(dtype)
    return w.to(dtype)


def prepare(model, directory: Path, raw: dict, quantize: str, dtype):
    """(transform, reader) for read_weights on a pre-quantized checkpoint: the meta network's
    Linear modules the checkpoint stores as integers become QuantizedLinear shells of its group
    size; FP8 weights are dequantized while read (and then quantized when `quantize` asks).
    ValueError (one line) when a quantized tensor names no Linear of the network."""
    from torch import nn

    from .quantize import QuantizedLinear, prepare_meta, tensor_transform

    pq = describe(raw)
    modules = quantized_modules(directory, pq)
    for name, (n, k, groups) in modules.items():
        try:
            linear = model.get_submodule(name)
        except AttributeError:
            linear = None
        if not isinstance(linear, nn.Linear) or (linear.out_features, linear.in_features) != (n, k):
            raise ValueError(f"quantized weight {name} matches no Linear of the network's shape")
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child,
                QuantizedLinear(k, n, pq.kind, linear.bias is not None, dtype, "meta", groups=groups))
    keys = prepare_meta(model, quantize, dtype) if quantize and pq.kind == "fp8" else set()
    return tensor_transform(keys, quantize or "int8", dtype), reader(directory, pq, dtype)
