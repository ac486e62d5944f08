"""Weight-only quantization on load: `--quantize int8|int4` (docs/engine.md, "Quantized weights").

What is quantized: every `nn.Linear` of the network and the fused 3-D expert weights of the MoE
families transformers runs (Qwen3.5-MoE / Qwen3-Next / DiffusionGemma `*Experts`), except what
`keeps_full_precision` names, which stays in the compute dtype: the token embeddings (a lookup,
no matmul), norms and biases (vectors), the MoE routers (llada2's `Gate`, transformers'
`*TopKRouter` are not Linear modules; DiffusionGemma's `router.proj` is kept by name: a wrong
route is a discrete error), the output head, and the GDN gates `in_proj_a` / `in_proj_b` and
`shared_expert_gate`. Measured with `scripts/measure_quant.py CKPT --layers` (max |Δlogit| /
top-1 agreement against float32, teacher-forced on 64 tokens of code):
- output head, bundled tiny (trained, tied): int4 kept 4.31 / 92.2%, quantized 4.96 / 90.6%;
  int8 kept 0.28 / 100%, quantized 0.24 / 100%. The 79M bench checkpoint (random weights, logits
  of std 67) shows no difference beyond its noise (int4 233 / 10.9% vs 242 / 12.5%). Kept in
  both formats: int4 measurably needs it, and for a tied head (the bundled models) a quantized
  head would be a second copy of the embedding. An untied head in int8 could be quantized at no
  measured cost (151,936 x 2048 = 311M parameters at Qwen3-1.7B's shape); not done yet.
- GDN gates, tiny GDN hybrid (random): int8 17.41 / 95.3% kept, 17.40 / 95.3% quantized; int4
  89.6 / 42.2% both. No measurable effect either way; kept, as they are under 1% of the weights
  and feed exponentials (the decay) and sigmoids.

The formats (integers and scales; the bytes per parameter are fit.QUANTIZED_BYTES_PER_PARAM's):
- int8: per output row, symmetric (scale = max|w| / 127.5, q in [-128, 127]): the scheme of
  torchao's `Int8WeightOnlyConfig` (`Int8Tensor.from_hp(w, PerRow())`), bit for bit (checked
  in every test run against torchao 0.18.0, which scripts/setup-dev.sh installs into
  `.venv/oracles`, off sys.path: tests/engine/conformance/test_quantized.py), and its weight-only linear
  (the int8 weight cast to the activation's dtype, one mm, the row scales on the output).
  Written here rather than imported: with torchao installed, transformers imports it on every
  model load (`transformers.modeling_utils` -> `quantizer_torchao`), measured +3.3 s of import
  on this machine and four warning lines on stderr (CUDA extensions it cannot load, a pytree
  deprecation) for users who never quantize. So it is no dependency, not even of the dev extra
  (the suite's one-line-stderr checks would see the warnings). torch's own CPU int8 kernel
  (`_weight_int8pack_mm`) was slower than this cast-and-mm here (2048x768 weight, float32, one
  thread: 4.2 ms vs 0.6 ms at 1 query, 147 ms vs 5.7 ms at 32; the float32 matmul 0.3 / 6 ms). Plain buffers also let `.to()`,
  state dicts and our loaders treat the weight like any other tensor.
- int4: group-wise, symmetric, group 128 along the input (64 / 32 / the whole row when the width
  is not a multiple of 128), scale = max|w| / 7.5 per group (compressed-tensors' symmetric rule),
  q in [-8, 7] stored as q + 8, two per byte (low nibble = even column), float32 scales. Our own
  format, not torchao's: torchao 0.18's `Int4WeightOnlyConfig` has no CPU layout on this torch
  (packing "plain" needs the `mslk` kernels, "plain_int32" says it does not support the CPU yet,
  "tile_packed_to_4d" needs CUDA, "opaque" is gone), and torch's own CPU int4 kernel
  (`_weight_int4pack_mm_for_cpu`) was 45x slower than the float32 matmul at 32 queries on this
  AVX2 machine (2048x768 weight: 280 ms vs 6 ms, one thread). The weight is dequantized in the
  matmul instead: unpacked, scaled and multiplied, every forward, on every device.

Loading: our own networks (engine/models/*.py) quantize each Linear's weight as it is read from
the safetensors (`read_weights`' transform), so the full-precision model is never held at once —
one tensor at a time. The networks transformers builds (DiffusionGemma, the GDN hybrids, Llama)
are quantized module by module right after `from_pretrained`, so their peak is the full model
once. On CUDA the same code runs after `.to(device)` (not tested here: this machine has no GPU).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

FORMATS = ("int8", "int4")
GROUP_SIZES = (128, 64, 32)
# Linear modules that stay in the compute dtype by name (see the module docstring).
KEEP_NAMES = frozenset({"lm_head", "in_proj_a", "in_proj_b", "shared_expert_gate", "router", "gate"})


def group_size(width: int) -> int:
    """The int4 group along an input of `width` columns."""
    return next((g for g in GROUP_SIZES if width % g == 0), width)


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q int8 [..., N, K], scale float32 [..., N, 1]): torchao's per-row symmetric scheme
    (`Int8Tensor.from_hp(w, PerRow())`, bit for bit: tests/engine/conformance/test_quantized.py)."""
    w = w.detach()
    # the scale in the weight's own dtype, then float32, as torchao computes it
    scale = (w.abs().amax(-1, keepdim=True) / 127.5).clamp_(min=torch.finfo(torch.float32).eps)
    scale = scale.to(torch.float32)
    q = torch.round(w.to(torch.float32) * (1.0 / scale)).clamp_(-128, 127).to(torch.int8)
    return q, scale


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed uint8 [..., N, K/2], scale float32 [..., N, K/group]), symmetric per group."""
    *lead, n, k = w.shape
    g = group_size(k)
    grouped = w.detach().to(torch.float32).reshape(*lead, n, k // g, g)
    scale = grouped.abs().amax(-1) / 7.5
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = (torch.round(grouped / scale[..., None]).clamp_(-8, 7) + 8).to(torch.uint8).reshape(*lead, n, k)
    return (q[..., 0::2] | (q[..., 1::2] << 4)).contiguous(), scale.contiguous()


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The signed int4 values [..., N, K] (int8, in [-8, 7]) of a packed [..., N, K/2] tensor."""
    low = (packed & 15).to(torch.int8) - 8
    high = (packed >> 4).to(torch.int8) - 8
    return torch.stack([low, high], dim=-1).flatten(-2)


def quantize_weight(w: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(integers, scales) of a weight [..., N, K] in `fmt`."""
    return quantize_int8(w) if fmt == "int8" else quantize_int4(w)


def dequantize(fmt: str, qweight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The weight [..., N, K] in `dtype` that these integers and scales stand for (scales [..., N,
    groups]: one per row, or per group of K / groups columns). int4 writes both nibbles straight
    into the output buffer, then shifts and scales it in place: 2.7x faster than unpacking to
    integers first (a 2048x768 weight, 30 vs 82 ms on this machine's loaded CPU)."""
    if fmt == "int8":
        w = qweight.to(torch.float32)
    else:
        *lead, n, half = qweight.shape
        w = torch.empty(*lead, n, half, 2, dtype=dtype, device=qweight.device)
        w[..., 0] = qweight & 15
        w[..., 1] = qweight >> 4
        w = w.view(*lead, n, 2 * half).sub_(8)
    *lead, n, k = w.shape
    groups = scale.shape[-1]
    grouped = w.view(*lead, n, groups, k // groups)
    grouped.mul_(scale[..., None].to(grouped.dtype if grouped.dtype == torch.float64 else torch.float32))
    return w.to(dtype)


def can_quantize(fmt: str, out_features: int, in_features: int) -> bool:
    """Whether a weight of this shape has a layout in `fmt` (int4 packs column pairs)."""
    return fmt == "int8" or in_features % 2 == 0


class QuantizedLinear(nn.Module):
    """A weight-only quantized nn.Linear: integers and scales as buffers, bias (if any) in the
    compute dtype; forward = the plain linear of the dequantized weight (int8: the cast weight's
    mm, then the row scales, as torchao's weight-only int8 linear)."""

    def __init__(self, in_features: int, out_features: int, fmt: str, bias: bool = False,
                 dtype: torch.dtype = torch.float32, device: Any = None, groups: int | None = None):
        """groups: scales per row (default: int8 one, int4 in_features / group_size)."""
        super().__init__()
        self.in_features, self.out_features, self.fmt, self.dtype = in_features, out_features, fmt, dtype
        if groups is None:
            groups = 1 if fmt == "int8" else in_features // group_size(in_features)
        s_shape = (out_features, groups)
        if fmt == "int8":
            q_shape, q_dtype = (out_features, in_features), torch.int8
        else:
            q_shape, q_dtype = (out_features, in_features // 2), torch.uint8
        self.register_buffer("qweight", torch.empty(q_shape, dtype=q_dtype, device=device))
        self.register_buffer("scale", torch.empty(s_shape, dtype=torch.float32, device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device),
                                 requires_grad=False) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, fmt: str) -> "QuantizedLinear":
        """The quantized form of a loaded nn.Linear (its weight's dtype becomes the compute dtype)."""
        w = linear.weight
        mod = cls(linear.in_features, linear.out_features, fmt, linear.bias is not None, w.dtype, "meta")
        q, s = quantize_weight(w, fmt)
        mod.qweight, mod.scale = q.to(w.device), s.to(w.device)
        if linear.bias is not None:
            mod.bias = nn.Parameter(linear.bias.detach(), requires_grad=False)
        return mod

    def dequantized(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The weight [N, K] these integers and scales stand for, in `dtype` (default: the bias's,
        else the compute dtype given at construction)."""
        return dequantize(self.fmt, self.qweight, self.scale, dtype or self._dtype())

    def _dtype(self) -> torch.dtype:
        return self.bias.dtype if self.bias is not None else self.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fmt == "int8" and self.scale.shape[-1] == 1:
            y = F.linear(x, self.qweight.to(x.dtype)) * self.scale.reshape(-1).to(x.dtype)
            return y + self.bias if self.bias is not None else y
        return F.linear(x, self.dequantized(x.dtype), self.bias)

    def _apply(self, fn, recurse=True):  # .to(dtype) changes the compute dtype, never the integers
        super()._apply(fn, recurse)
        try:
            probe = fn(torch.empty((), dtype=self.dtype))
        except (RuntimeError, TypeError):
            return self
        if isinstance(probe, torch.Tensor) and probe.is_floating_point():
            self.dtype = probe.dtype
        return self

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fmt={self.fmt}"


class QuantizedExperts(nn.Module):
    """transformers' fused MoE experts (`gate_up_proj` [E, 2I, H], `down_proj` [E, H, I]) with
    quantized weights; forward is their eager loop over the experts the tokens chose, each
    expert's weight dequantized as it is used."""

    def __init__(self, experts: nn.Module, fmt: str):
        super().__init__()
        self.num_experts, self.act_fn, self.fmt = experts.num_experts, experts.act_fn, fmt
        self.dtype = experts.gate_up_proj.dtype
        for name in ("gate_up_proj", "down_proj"):
            q, s = quantize_weight(getattr(experts, name), fmt)
            self.register_buffer(f"{name}_q", q)
            self.register_buffer(f"{name}_scale", s)

    def weight(self, name: str, e: int, dtype: torch.dtype) -> torch.Tensor:
        """Expert `e`'s `name` weight, dequantized."""
        return dequantize(self.fmt, getattr(self, f"{name}_q")[e], getattr(self, f"{name}_scale")[e], dtype)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        dtype = hidden_states.dtype
        for e in torch.unique(top_k_index).tolist():
            if e >= self.num_experts:
                continue
            token_idx, top_k_pos = torch.where(top_k_index == e)
            gate, up = F.linear(hidden_states[token_idx], self.weight("gate_up_proj", e, dtype)).chunk(2, dim=-1)
            y = F.linear(self.act_fn(gate) * up, self.weight("down_proj", e, dtype))
            out.index_add_(0, token_idx, (y * top_k_weights[token_idx, top_k_pos, None]).to(dtype))
        return out


def keeps_full_precision(name: str, module: nn.Module, head: nn.Module | None) -> bool:
    """Whether a Linear stays in the compute dtype (the module docstring says why)."""
    return module is head or not KEEP_NAMES.isdisjoint(name.split("."))


def _is_fused_experts(module: nn.Module) -> bool:
    w = getattr(module, "gate_up_proj", None)
    return isinstance(w, torch.Tensor) and w.dim() == 3 and isinstance(getattr(module, "down_proj", None),
                                                                       torch.Tensor)


def _targets(model: nn.Module, fmt: str) -> list[tuple[str, nn.Module]]:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    found = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and not keeps_full_precision(name, module, head) \
                and can_quantize(fmt, module.out_features, module.in_features):
            found.append((name, module))
        elif _is_fused_experts(module):
            found.append((name, module))
    return found


def _swap(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, new)


def quantize_model(model: nn.Module, fmt: str) -> int:
    """Quantize a loaded network in place, module by module (each full-precision weight is freed
    once its quantized form exists); returns how many modules were quantized."""
    targets = _targets(model, fmt)
    for name, module in targets:
        new = QuantizedExperts(module, fmt) if _is_fused_experts(module) else QuantizedLinear.from_linear(module, fmt)
        _swap(model, name, new)
    return len(targets)


def prepare_meta(model: nn.Module, fmt: str, dtype: torch.dtype) -> set[str]:
    """Swap the quantizable Linear modules of a network built on the meta device (no memory) for
    empty QuantizedLinear shells; returns the checkpoint keys (`NAME.weight`) to quantize as they
    are read (`tensor_transform`)."""
    keys = set()
    for name, module in _targets(model, fmt):
        if not isinstance(module, nn.Linear):
            continue
        _swap(model, name, QuantizedLinear(module.in_features, module.out_features, fmt,
                                           module.bias is not None, dtype, "meta"))
        keys.add(f"{name}.weight")
    return keys


def tensor_transform(keys: set[str], fmt: str, dtype: torch.dtype) -> Callable[[str, torch.Tensor], dict]:
    """For read_weights: a tensor named in `keys` becomes its integers and scales, any other the
    compute dtype — one tensor at a time, as it is read. Kept tensors are copies: one still
    backed by the safetensors file's memory map would keep the whole file mapped, and every page
    read while quantizing resident (measured: +290 MiB of RSS on the 79M checkpoint)."""
    def transform(key: str, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        if key in keys:
            q, s = quantize_weight(tensor, fmt)
            prefix = key[: -len("weight")]
            return {prefix + "qweight": q, prefix + "scale": s}
        return {key: tensor.clone() if tensor.dtype == dtype else tensor.to(dtype)}
    return transform


def dequantized_reference(model: nn.Module) -> nn.Module:
    """The same network with every quantized module replaced by the plain one running its
    dequantized weights (same integers and scales): the reference of the quantization tests."""
    for name, module in list(model.named_modules()):
        if isinstance(module, QuantizedLinear):
            lin = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None,
                            device="meta")
            lin.weight = nn.Parameter(module.dequantized(), requires_grad=False)
            if module.bias is not None:
                lin.bias = nn.Parameter(module.bias.detach().clone(), requires_grad=False)
            _swap(model, name, lin)
        elif isinstance(module, QuantizedExperts):
            _swap(model, name, _PlainExperts(module))
    return model


class _PlainExperts(nn.Module):
    """QuantizedExperts' dequantized weights as the plain fused experts' loop runs them."""

    def __init__(self, q: QuantizedExperts):
        super().__init__()
        self.num_experts, self.act_fn = q.num_experts, q.act_fn
        self.gate_up_proj = nn.Parameter(dequantize(q.fmt, q.gate_up_proj_q, q.gate_up_proj_scale, q.dtype),
                                         requires_grad=False)
        self.down_proj = nn.Parameter(dequantize(q.fmt, q.down_proj_q, q.down_proj_scale, q.dtype),
                                      requires_grad=False)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        for e in torch.unique(top_k_index).tolist():
            if e >= self.num_experts:
                continue
            token_idx, top_k_pos = torch.where(top_k_index == e)
            gate, up = F.linear(hidden_states[token_idx], self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(self.act_fn(gate) * up, self.down_proj[e])
            out.index_add_(0, token_idx, (y * top_k_weights[token_idx, top_k_pos, None]).to(out.dtype))
        return out


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the network's parameters and persistent buffers as loaded (shared ones once)."""
    seen, total = set(), 0
    tensors = list(model.parameters()) + [b for _, b in model.named_buffers()]
    for t in tensors:
        key = (t.data_ptr(), t.numel(), t.dtype)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def release_freed_memory() -> None:
    """Give the heap's freed pages back to the system (glibc `malloc_trim`; a no-op elsewhere):
    quantizing frees a float copy of every matrix, and glibc keeps the pages. Measured on the
    79M checkpoint, int4: anonymous RSS 410 MiB after loading, 204 MiB after this."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
