"""LLaDA2.0 (`llada2_moe`, the BailingMoeV2 network) as our own compact module.

transformers has no class for it and the checkpoint's own modeling file is never run
(docs/security.md: no checkpoint code), so the network is written here from the LLaDA2.0 tech
report and the public reference code (inclusionAI/LLaDA2.0; read to learn, not copied):
attention with one fused `query_key_value` projection, RMS-normalised queries and keys per head,
rotary embedding on the first `partial_rotary_factor` of each head, output `dense`; the first
`first_k_dense_replace` layers have a gated MLP, the rest a mixture of experts: a sigmoid router
whose expert bias steers selection only, grouped top-k (experts in `n_group` groups, a group
scored by its two best experts, the best `topk_group` groups kept, then the top `k` experts),
weights normalised and scaled by `routed_scaling_factor`, plus always-on shared experts.
Parameter names and shapes are the released checkpoints' (model.word_embeddings,
model.layers.N.attention.query_key_value, ...mlp.gate.expert_bias, lm_head), so a download loads
as is; a missing or mis-shaped tensor is one error line (load_llada2).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .qwen import MLP, RMSNorm, _quantizer, _rotate_half  # the same pieces as Qwen's
from .state import ModelConfig, OwnNetwork
from .weights import read_weights

MASK_ID = 156895  # the reference generate's mask_id default
EOS_ID = 156892  # the reference generate's eos_id default (<|endoftext|>, also the pad id)


class Attention(nn.Module):
    def __init__(self, c: SimpleNamespace, layer_idx: int):
        super().__init__()
        self.layer_idx, self.h, self.kv, self.d = layer_idx, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.query_key_value = nn.Linear(c.hidden_size, (self.h + 2 * self.kv) * self.d, bias=c.use_qkv_bias)
        self.query_layernorm = RMSNorm(self.d, c.rms_norm_eps)
        self.key_layernorm = RMSNorm(self.d, c.rms_norm_eps)
        self.dense = nn.Linear(self.h * self.d, c.hidden_size, bias=c.use_bias)
        self.qk_norm = c.use_qk_norm

    def forward(self, x, cos, sin, mask, cache):
        b, t, _ = x.shape
        qkv = self.query_key_value(x).view(b, t, self.h + 2 * self.kv, self.d)
        q, k, v = (s.transpose(1, 2) for s in qkv.split([self.h, self.kv, self.kv], dim=2))
        if self.qk_norm:
            q, k = self.query_layernorm(q), self.key_layernorm(k)
        r = cos.shape[-1]  # rotary on the first r dims of each head
        cos, sin = cos[:, None], sin[:, None]
        q = torch.cat([q[..., :r] * cos + _rotate_half(q[..., :r]) * sin, q[..., r:]], dim=-1)
        k = torch.cat([k[..., :r] * cos + _rotate_half(k[..., :r]) * sin, k[..., r:]], dim=-1)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        # no mask: every query sees every key (a denoise step's block-causal mask is all zeros)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=False,
                                             enable_gqa=self.h != self.kv)
        return self.dense(out.transpose(1, 2).reshape(b, t, self.h * self.d))


class Gate(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(c.num_experts, c.hidden_size))
        self.register_buffer("expert_bias", torch.zeros(c.num_experts))
        self.k, self.groups, self.keep = c.num_experts_per_tok, c.n_group, c.topk_group
        self.scale, self.normalise = c.routed_scaling_factor, c.norm_topk_prob

    def forward(self, x: torch.Tensor):
        """x [N, H] -> (expert ids [N, k], weights [N, k]) by grouped top-k (DeepSeek-V3 style)."""
        scores = torch.sigmoid(F.linear(x.float() if x.dtype != torch.float64 else x,
                                        self.weight.to(torch.float64 if x.dtype == torch.float64 else torch.float32)))
        biased = scores + self.expert_bias.to(scores.dtype)
        n = x.shape[0]
        grouped = biased.view(n, self.groups, -1)
        group_score = grouped.topk(min(2, grouped.shape[-1]), dim=-1).values.sum(-1)  # [N, G]
        kept = group_score.topk(self.keep, dim=-1).indices
        allow = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, kept, True)
        allow = allow[:, :, None].expand_as(grouped).reshape(n, -1)
        ids = biased.masked_fill(~allow, float("-inf")).topk(self.k, dim=-1).indices
        weights = scores.gather(1, ids)
        if self.k > 1 and self.normalise:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return ids, weights * self.scale


class SparseMoE(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.experts = nn.ModuleList(MLP(c.hidden_size, c.moe_intermediate_size) for _ in range(c.num_experts))
        self.gate = Gate(c)
        self.shared_experts = (MLP(c.hidden_size, c.moe_intermediate_size * c.num_shared_experts)
                               if c.num_shared_experts else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        flat = x.reshape(-1, h)
        ids, weights = self.gate(flat)
        out = torch.zeros_like(flat)
        for e in torch.unique(ids).tolist():  # only the experts some token chose
            rows, slot = torch.nonzero(ids == e, as_tuple=True)
            y = self.experts[e](flat[rows]) * weights[rows, slot, None].to(flat.dtype)
            out.index_add_(0, rows, y)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view(b, t, h)


class DecoderLayer(nn.Module):
    def __init__(self, c: SimpleNamespace, i: int):
        super().__init__()
        self.attention = Attention(c, i)
        moe = c.num_experts and i >= c.first_k_dense_replace
        self.mlp = SparseMoE(c) if moe else MLP(c.hidden_size, c.intermediate_size)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache):
        x = x + self.attention(self.input_layernorm(x), cos, sin, mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c, i) for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        rot = int(c.head_dim * c.partial_rotary_factor)
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
        self.register_buffer("inv_freq", inv.float(), persistent=False)


class LLaDA2MoE(OwnNetwork, nn.Module):
    """The network; forward matches what engine/runtime.py's ForwardRunner passes."""

    # no mask: every query sees every key (engine/block_decode.py passes none where the
    # block-causal mask would be all zeros)
    mask_free_forward = True

    def __init__(self, raw: dict[str, Any]):
        super().__init__()
        c = SimpleNamespace(**_defaults(raw))
        self.c = c
        self.config = ModelConfig(num_hidden_layers=c.num_hidden_layers, vocab_size=c.vocab_size)
        self.model = Backbone(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def forward(self, input_ids, position_ids=None, attention_mask=None, cache=None, use_cache=True,
                logits_to_keep: int = 0, **_):
        x = self.model.word_embeddings(input_ids)
        if position_ids is None:
            start = cache.get_seq_length() if cache is not None else 0
            position_ids = torch.arange(start, start + input_ids.shape[1], device=x.device)[None]
        freqs = position_ids[..., None].double() * self.model.inv_freq.double()  # [B, T, r/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        mask = attention_mask.to(x.dtype) if attention_mask is not None else None
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask, cache if use_cache else None)
        x = self.model.norm(x)
        if logits_to_keep:
            x = x[:, -logits_to_keep:]
        return SimpleNamespace(logits=self.lm_head(x))


class UnsupportedConfig(ValueError):
    """A config.json this module does not implement (one line naming the key and its value)."""


# rope_scaling: the reference builds its rotary embedding from transformers' ROPE_INIT_FUNCTIONS
# by `rope_type` (or the older `type`); the released LLaDA2.0/2.1 configs carry none. This module
# implements the default rotary only, so any other type is refused by name, never run wrong.
ROPE_TYPES = ("default",)


def _check_rope(raw: dict[str, Any]) -> None:
    scaling = raw.get("rope_scaling")
    if scaling is None:
        return
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else scaling
    if kind not in ROPE_TYPES:
        raise UnsupportedConfig(f"llada2_moe rope_scaling type {kind!r} is not supported (supported: "
                                "none or 'default'; the released LLaDA2 checkpoints use none)")


def _defaults(raw: dict[str, Any]) -> dict[str, Any]:
    c = dict(use_qkv_bias=False, use_bias=False, use_qk_norm=True, partial_rotary_factor=0.5,
             first_k_dense_replace=0, num_shared_experts=0, n_group=1, topk_group=1,
             routed_scaling_factor=1.0, norm_topk_prob=True, rms_norm_eps=1e-6, rope_theta=600000.0,
             num_experts=0, num_experts_per_tok=1, moe_intermediate_size=0)
    c.update({k: v for k, v in raw.items() if v is not None})
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    _check_rope(c)
    if c.get("score_function", "sigmoid") != "sigmoid":
        raise UnsupportedConfig(f"llada2_moe router score_function {c['score_function']!r} is not supported")
    return c


def load_llada2(directory: Path, raw: dict[str, Any], dtype: torch.dtype, quantize: str = ""):
    """Build the network from config.json and load its safetensors; raises ValueError with one
    line when a tensor is missing or has the wrong shape. quantize: as load_qwen's (the experts
    are Linear modules here, so they are quantized too)."""
    with torch.device("meta"):
        model = LLaDA2MoE(raw)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    transform, reader = _quantizer(model, quantize, dtype, directory, raw)
    state = read_weights(directory, expected, optional=lambda k: k.endswith("expert_bias"), transform=transform,
                         reader=reader)
    model = model.to_empty(device="cpu")
    for name, buf in model.named_buffers():
        if name.endswith("expert_bias") and name not in state:  # a release without router bias
            buf.zero_()
    model.load_state_dict(state if transform or reader else {k: v.to(dtype) for k, v in state.items()},
                          strict=False)
    model.model.inv_freq = _inv_freq(model.c)  # a buffer to_empty() left uninitialised
    return model.to(dtype).eval()


def _inv_freq(c: SimpleNamespace) -> torch.Tensor:
    rot = int(c.head_dim * c.partial_rotary_factor)
    return (1.0 / (c.rope_theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))).float()
