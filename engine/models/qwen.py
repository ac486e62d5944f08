"""Qwen3-, Qwen2- and Llama-shaped decoders as our own compact module (docs/engine.md, "Native models").

Loading transformers' modelling code for these families costs more than the rest of startup
together (it pulls torch._dynamo and torch.distributed through modeling_utils), while the network
is a few dozen lines. This is the network as the Qwen2 / Qwen3 technical reports describe it (read
public code to learn, not copied): pre-norm decoder layers with RMSNorm, grouped-query attention
with rotary position embedding (the default rope only), per-head RMSNorm of queries and keys
(Qwen3), biased q/k/v projections (Qwen2), neither (Llama), a SwiGLU MLP, and a tied or untied
output head.
Parameter names and shapes are the released checkpoints' (model.embed_tokens,
model.layers.N.self_attn.q_proj, ..., lm_head), so the same safetensors load as is; a missing or
mis-shaped tensor is one error line (load_qwen). The config object and the KV cache are our own
(engine/models/state.py), so nothing of transformers is imported.

`unsupported(raw, dtype)` says why a config is not plainly one of these (rope scaling, sliding
window, another activation, ...); the loader then takes the transformers path instead.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .state import ModelConfig, OwnNetwork
from .weights import read_weights

QWEN3_TYPES = {"qwen3", "sdar"}  # q/k RMSNorm, no bias by default (attention_bias)
QWEN2_TYPES = {"qwen2", "fast_dllm_qwen", "dream"}  # biased q/k/v, no q/k norm
LLAMA_TYPES = {"llama"}  # no q/k norm; q/k/v/o biased only with attention_bias
BIDIRECTIONAL_TYPES = {"dream"}  # Dream: full attention, no causal mask (docs/engine.md, "Full-attention diffusion")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _kind(raw: dict[str, Any]) -> str | None:
    model_type = str(raw.get("model_type", "")).lower()
    if model_type in QWEN3_TYPES:
        return "qwen3"
    if model_type in QWEN2_TYPES:
        return "qwen2"
    if model_type in LLAMA_TYPES:
        return "llama"
    return None


def _rope_theta(raw: dict[str, Any]) -> float | None:
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and params.get("rope_theta") is not None:
        return float(params["rope_theta"])
    return float(raw["rope_theta"]) if raw.get("rope_theta") is not None else None


def unsupported(raw: dict[str, Any], dtype: torch.dtype) -> str | None:
    """Why this config is not plainly a Qwen3/Qwen2/Llama decoder we run natively (None: it is)."""
    if _kind(raw) is None:
        return f"model_type {raw.get('model_type')!r}"
    if dtype not in DTYPES:
        return f"dtype {dtype}"
    for key in ("rope_scaling", "rope_parameters"):
        rope = raw.get(key)
        if rope is not None and (not isinstance(rope, dict)
                                 or rope.get("rope_type", rope.get("type", "default")) != "default"):
            return f"{key} {rope!r}"
    if _rope_theta(raw) is None:
        return "no rope_theta"
    if raw.get("use_sliding_window"):
        return "sliding window"
    if any(t != "full_attention" for t in raw.get("layer_types") or []):
        return "layer_types other than full_attention"
    if raw.get("hidden_act", "silu") != "silu":
        return f"hidden_act {raw.get('hidden_act')!r}"
    if raw.get("num_experts") or raw.get("mlp_bias") or raw.get("partial_rotary_factor", 1.0) != 1.0:
        return "not a dense Qwen decoder"
    return None


def _settings(raw: dict[str, Any]) -> SimpleNamespace:
    """The config with transformers' Qwen2/Qwen3 defaults for what a config.json leaves out."""
    kind = _kind(raw)
    heads = int(raw.get("num_attention_heads", 32))
    kv = raw.get("num_key_value_heads", 32)
    hidden = int(raw.get("hidden_size", 4096))
    head_dim = raw.get("head_dim") or (128 if kind == "qwen3" else hidden // heads)
    return SimpleNamespace(
        kind=kind, vocab_size=int(raw.get("vocab_size", 151936)), hidden_size=hidden,
        intermediate_size=int(raw.get("intermediate_size", 22016)),
        num_hidden_layers=int(raw.get("num_hidden_layers", 32)), num_attention_heads=heads,
        num_key_value_heads=int(heads if kv is None else kv), head_dim=int(head_dim),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)), rope_theta=_rope_theta(raw),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        qkv_bias=kind == "qwen2" or bool(raw.get("attention_bias", False)),
        o_bias=kind in ("qwen3", "llama") and bool(raw.get("attention_bias", False)),
        qk_norm=kind == "qwen3")


class Linear(nn.Linear):
    """nn.Linear without initialisation: every weight comes from the checkpoint (load_qwen), and
    nn.init on meta tensors goes through torch._refs, which imports torch._dynamo (seconds)."""

    def reset_parameters(self) -> None:
        pass


class Embedding(nn.Embedding):
    """nn.Embedding without initialisation (as Linear)."""

    def reset_parameters(self) -> None:
        pass


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, device: Any = None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32) if dtype != torch.float64 else x
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def sdpa(module, query, key, value, attention_mask, scaling=None, **_):
    """query [B, Hq, L, D], key/value [B, Hkv, S, D], 4-D additive mask -> [B, L, Hq, D].
    No mask: every query sees every key (never causal; the forward builds the causal mask)."""
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scaling,
                                         is_causal=False, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2), None


class Attention(nn.Module):
    is_causal = True

    def __init__(self, c: SimpleNamespace, layer_idx: int):
        super().__init__()
        self.layer_idx, self.h, self.kv, self.d = layer_idx, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.num_key_value_groups = self.h // self.kv
        self.scaling = self.d ** -0.5
        dev = c.device
        self.q_proj = Linear(c.hidden_size, self.h * self.d, bias=c.qkv_bias, device=dev)
        self.k_proj = Linear(c.hidden_size, self.kv * self.d, bias=c.qkv_bias, device=dev)
        self.v_proj = Linear(c.hidden_size, self.kv * self.d, bias=c.qkv_bias, device=dev)
        self.o_proj = Linear(self.h * self.d, c.hidden_size, bias=c.o_bias, device=dev)
        if c.qk_norm:
            self.q_norm = RMSNorm(self.d, c.rms_norm_eps, dev)
            self.k_norm = RMSNorm(self.d, c.rms_norm_eps, dev)
        self.qk_norm = c.qk_norm
        self.attn_fn = sdpa  # set_attn_implementation swaps in the CUDA kernel hook

    def forward(self, x, cos, sin, mask, cache):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d)
        k = self.k_proj(x).view(b, t, self.kv, self.d)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        cos, sin = cos[:, None], sin[:, None]
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        # no mask means every key, also to the CUDA hook's SDPA fallback (which reads is_causal)
        out, _ = self.attn_fn(self, q, k, v, mask, scaling=self.scaling, is_causal=False)
        return self.o_proj(out.reshape(b, t, self.h * self.d))


class MLP(nn.Module):
    def __init__(self, hidden: int, inner: int, device: Any = None):
        super().__init__()
        self.gate_proj = Linear(hidden, inner, bias=False, device=device)
        self.up_proj = Linear(hidden, inner, bias=False, device=device)
        self.down_proj = Linear(inner, hidden, bias=False, device=device)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: SimpleNamespace, i: int):
        super().__init__()
        self.self_attn = Attention(c, i)
        self.mlp = MLP(c.hidden_size, c.intermediate_size, c.device)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, c.device)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, c.device)

    def forward(self, x, cos, sin, mask, cache):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.embed_tokens = Embedding(c.vocab_size, c.hidden_size, device=c.device)
        self.layers = nn.ModuleList(DecoderLayer(c, i) for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps, c.device)


class QwenForCausalLM(OwnNetwork, nn.Module):
    """The network; forward takes what engine/runtime.py's ForwardRunner passes."""

    # forward(attention_mask=None, is_causal=False): every query sees every key, no mask built
    # (engine/block_decode.py passes that where the block-causal mask would be all zeros)
    mask_free_forward = True

    def __init__(self, raw: dict[str, Any], device: Any = None):
        """device "meta": shapes only, no memory and no initialisation (load_qwen fills them)."""
        super().__init__()
        c = _settings(raw)
        c.device = device
        self.c = c
        self.config = ModelConfig(num_hidden_layers=c.num_hidden_layers, vocab_size=c.vocab_size,
                                       hidden_size=c.hidden_size,
                                       num_attention_heads=c.num_attention_heads,
                                       num_key_value_heads=c.num_key_value_heads)
        self.model = Backbone(c)
        self.lm_head = Linear(c.hidden_size, c.vocab_size, bias=False, device=c.device)
        self.register_buffer("inv_freq", _inv_freq(c), persistent=False)
        # without a mask, queries see every key (Dream) instead of the keys before them
        self.causal = str(raw.get("model_type", "")).lower() not in BIDIRECTIONAL_TYPES

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_attn_implementation(self, name: str) -> None:
        """"sdpa", or engine/kernel_hooks.py's registered block-attention function."""
        from ..kernel_hooks import ATTENTION_NAME, _clover_attention

        fns = {"sdpa": sdpa, ATTENTION_NAME: _clover_attention}
        if name not in fns:
            raise ValueError(f"attention implementation {name!r} is not available here")
        for layer in self.model.layers:
            layer.self_attn.attn_fn = fns[name]
        self.config._attn_implementation = name

    def forward(self, input_ids, position_ids=None, attention_mask=None, cache=None, use_cache=True,
                logits_to_keep: int | slice = 0, is_causal: bool | None = None, **_):
        """attention_mask: a 4-D additive mask, or None: causal (as transformers; Dream: full), or
        full with is_causal=False."""
        x = self.model.embed_tokens(input_ids)
        cache = cache if use_cache else None
        start = cache.get_seq_length() if cache is not None else 0
        t = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(start, start + t, device=x.device)[None]
        inv = self.inv_freq.float()
        freqs = position_ids[..., None].to(torch.float32) * inv  # [B, T, D/2], float32 as transformers
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        if attention_mask is not None:
            mask = attention_mask.to(x.dtype)
        elif t > 1 and (self.causal if is_causal is None else is_causal):  # over cache + queries
            allowed = torch.ones(t, start + t, dtype=torch.bool, device=x.device).tril(start)
            mask = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device)
            mask = mask.masked_fill(~allowed, torch.finfo(x.dtype).min)[None, None]
        else:
            mask = None
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask, cache)
        x = self.model.norm(x)
        if isinstance(logits_to_keep, slice):  # these rows only (engine/fullattn_decode.py)
            x = x[:, logits_to_keep]
        elif logits_to_keep:
            x = x[:, -logits_to_keep:]
        return SimpleNamespace(logits=self.lm_head(x))


def _inv_freq(c: SimpleNamespace) -> torch.Tensor:
    # as transformers' default rope: int64 arange, float32 division
    d = c.head_dim
    return 1.0 / (c.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64, device="cpu").float() / d))


def load_qwen(directory: Path, raw: dict[str, Any], dtype: torch.dtype, quantize: str = "") -> QwenForCausalLM:
    """Build the network from config.json and load its safetensors; raises ValueError with one
    line when a tensor is missing or has the wrong shape. quantize: int8 / int4, each Linear as
    its weight is read (engine/quantize.py)."""
    # meta tensors as factory arguments, not torch.device("meta") as a context: under that
    # mode factory calls go through torch._refs, which imports torch._dynamo (seconds of startup)
    model = QwenForCausalLM(raw, device="meta")
    tied = model.c.tie_word_embeddings
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()
                if not (tied and k == "lm_head.weight")}
    transform, reader = _quantizer(model, quantize, dtype, directory, raw)
    state = read_weights(directory, expected, transform=transform, reader=reader)
    model.load_state_dict(state if transform or reader else _converted(state, dtype), strict=False, assign=True)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.inv_freq = _inv_freq(model.c)  # float32, as transformers keeps it whatever the dtype
    model.generation_config = _generation_config(directory)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def _quantizer(model: nn.Module, quantize: str, dtype: torch.dtype, directory: Path, raw: dict):
    """read_weights' per-tensor transform and reader for `quantize` and a pre-quantized
    checkpoint ((None, None): neither); swaps the meta network's Linear modules for quantized
    ones first (engine/quantize.py, engine/prequantized.py)."""
    if raw.get("quantization_config"):
        from ..prequantized import prepare

        return prepare(model, directory, raw, quantize, dtype)
    if not quantize:
        return None, None
    from ..quantize import prepare_meta, tensor_transform

    return tensor_transform(prepare_meta(model, quantize, dtype), quantize, dtype), None


def _converted(state: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The tensors in `dtype`, on the decode's thread count (engine/threads.py; a small checkpoint
    on one thread: measured on the shared 2-core machine, the bundled tiny's bf16 -> float32 took
    4 ms on one thread and 220 ms on two)."""
    from ..threads import policy_threads, torch_threads

    with torch_threads(policy_threads(sum(t.numel() for t in state.values())).threads):
        return {k: v if v.dtype == dtype else v.to(dtype) for k, v in state.items()}


def _generation_config(directory: Path) -> SimpleNamespace | None:
    """generation_config.json's EOS ids (what transformers' generation_config would hold)."""
    path = directory / "generation_config.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, json.JSONDecodeError):
        data = {}
    eos = data.get("eos_token_id") if isinstance(data, dict) else None
    return SimpleNamespace(eos_token_id=eos) if eos is not None else None
