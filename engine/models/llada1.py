"""LLaDA 1.x / 1.5 (`llada`, LLaDAModelLM) as our own compact module.

transformers has no class for it and the checkpoint's own modeling file is never run
(docs/security.md: no checkpoint code), so the network is written here from the LLaDA paper
(Nie et al. 2025, "Large Language Diffusion Models") and the public reference code
(ML-GSAI/LLaDA, GSAI-ML/LLaDA-8B-Instruct `modeling_llada.py`, an OLMo-derived "llama" block;
read to learn, not copied): a Llama-shaped decoder with **no causal mask** (every position sees
every other), RMSNorm (`attn_norm`, `ff_norm`, `ln_f`), rotary embedding over whole heads
(computed in float32 when `rope_full_precision`), separate q/k/v projections, output `attn_out`,
a SwiGLU MLP written as `ff_out(silu(ff_proj(x)) * up_proj(x))`, and an untied output head
`transformer.ff_out` (or the embedding, `weight_tying`). Logits are not shifted: position i
predicts token i. Parameter names and shapes are the released checkpoints'
(model.transformer.wte, model.transformer.blocks.N.q_proj, ...), so a download loads as is; a
missing or mis-shaped tensor is one error line (load_llada1). docs/engine.md, "Full-attention
diffusion".
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .qwen import Embedding, Linear, RMSNorm, _quantizer, _rotate_half
from .state import ModelConfig, OwnNetwork
from .weights import read_weights

MASK_ID = 126336  # the reference generate's mask_id default
EOS_ID = 126081  # <|endoftext|> (config eos/pad); <|eot_id|> 126348 ends an instruct turn


def _settings(raw: dict[str, Any]) -> SimpleNamespace:
    """The config's sizes, with the reference config class's defaults for what it leaves out."""
    if str(raw.get("block_type", "llama")) != "llama":
        raise ValueError(f"LLaDA block_type {raw.get('block_type')!r} is not supported (only 'llama')")
    if raw.get("alibi") or raw.get("rope") is False:
        raise ValueError("LLaDA without rotary embedding (alibi) is not supported")
    if str(raw.get("activation_type", "silu")) != "silu":
        raise ValueError(f"LLaDA activation_type {raw.get('activation_type')!r} is not supported")
    if str(raw.get("layer_norm_type", "rms")) != "rms":
        raise ValueError(f"LLaDA layer_norm_type {raw.get('layer_norm_type')!r} is not supported")
    d = int(raw.get("d_model", 4096))
    heads = int(raw.get("n_heads", 32))
    kv = raw.get("n_kv_heads")
    if raw.get("multi_query_attention"):
        kv = 1
    mlp = raw.get("mlp_hidden_size") or int(raw.get("mlp_ratio", 4)) * d
    vocab = int(raw.get("embedding_size") or raw.get("vocab_size", 50257))
    return SimpleNamespace(
        d_model=d, n_heads=heads, n_kv_heads=int(heads if kv is None else kv), head_dim=d // heads,
        n_layers=int(raw.get("n_layers", 32)), mlp_hidden=int(mlp), vocab=vocab,
        eps=float(raw.get("rms_norm_eps", 1e-5)), rope_theta=float(raw.get("rope_theta", 10000.0)),
        rope_full_precision=bool(raw.get("rope_full_precision", True)),
        qkv_bias=bool(raw.get("include_qkv_bias", False) or raw.get("include_bias", False)),
        bias=bool(raw.get("include_bias", False)), tied=bool(raw.get("weight_tying", False)),
        device=None)


class Block(nn.Module):
    """One "llama" block: pre-norm attention and SwiGLU MLP, both residual."""

    def __init__(self, c: SimpleNamespace, i: int):
        super().__init__()
        self.i, self.h, self.kv, self.d = i, c.n_heads, c.n_kv_heads, c.head_dim
        dev = c.device
        self.attn_norm = RMSNorm(c.d_model, c.eps, dev)
        self.ff_norm = RMSNorm(c.d_model, c.eps, dev)
        self.q_proj = Linear(c.d_model, self.h * self.d, bias=c.qkv_bias, device=dev)
        self.k_proj = Linear(c.d_model, self.kv * self.d, bias=c.qkv_bias, device=dev)
        self.v_proj = Linear(c.d_model, self.kv * self.d, bias=c.qkv_bias, device=dev)
        self.attn_out = Linear(self.h * self.d, c.d_model, bias=c.bias, device=dev)
        self.ff_proj = Linear(c.d_model, c.mlp_hidden, bias=c.bias, device=dev)
        self.up_proj = Linear(c.d_model, c.mlp_hidden, bias=c.bias, device=dev)
        self.ff_out = Linear(c.mlp_hidden, c.d_model, bias=c.bias, device=dev)

    def forward(self, x, cos, sin, mask, cache):
        b, t, _ = x.shape
        y = self.attn_norm(x)
        q = self.q_proj(y).view(b, t, self.h, self.d).transpose(1, 2)  # [B, H, T, D]
        k = self.k_proj(y).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(y).view(b, t, self.kv, self.d).transpose(1, 2)
        dtype = q.dtype
        rq, rk = (q.to(cos.dtype), k.to(cos.dtype))  # float32 rope when full precision
        q = (rq * cos[:, None] + _rotate_half(rq) * sin[:, None]).to(dtype)
        k = (rk * cos[:, None] + _rotate_half(rk) * sin[:, None]).to(dtype)
        if cache is not None:
            k, v = cache.update(k, v, self.i)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.h != self.kv)
        x = x + self.attn_out(out.transpose(1, 2).reshape(b, t, self.h * self.d))
        y = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(y)) * self.up_proj(y))


class Transformer(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.wte = Embedding(c.vocab, c.d_model, device=c.device)
        self.blocks = nn.ModuleList(Block(c, i) for i in range(c.n_layers))
        self.ln_f = RMSNorm(c.d_model, c.eps, c.device)
        if not c.tied:
            self.ff_out = Linear(c.d_model, c.vocab, bias=False, device=c.device)


class Backbone(nn.Module):
    def __init__(self, c: SimpleNamespace):
        super().__init__()
        self.transformer = Transformer(c)


class LLaDA1(OwnNetwork, nn.Module):
    """The network (bidirectional); forward takes what engine/fullattn_decode.py passes."""

    causal = False

    def __init__(self, raw: dict[str, Any], device: Any = None):
        super().__init__()
        c = _settings(raw)
        c.device = device
        c.num_hidden_layers = c.n_layers
        self.c = c
        self.config = ModelConfig(num_hidden_layers=c.n_layers, vocab_size=c.vocab,
                                  hidden_size=c.d_model, num_attention_heads=c.n_heads,
                                  num_key_value_heads=c.n_kv_heads)
        self.model = Backbone(c)
        self.register_buffer("inv_freq", _inv_freq(c), persistent=False)

    @property
    def lm_head(self):
        t = self.model.transformer
        return t.wte if self.c.tied else t.ff_out

    def get_input_embeddings(self):
        return self.model.transformer.wte

    def forward(self, input_ids, position_ids=None, attention_mask=None, cache=None, use_cache=True,
                logits_to_keep: int | slice = 0, **_):
        t = self.model.transformer
        x = t.wte(input_ids)
        if position_ids is None:
            start = cache.get_seq_length() if cache is not None else 0
            position_ids = torch.arange(start, start + input_ids.shape[1], device=x.device)[None]
        rope_dtype = torch.float32 if self.c.rope_full_precision and x.dtype != torch.float64 else x.dtype
        freqs = position_ids[..., None].to(torch.float32) * self.inv_freq.float()  # [B, T, D/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(rope_dtype), emb.sin().to(rope_dtype)
        mask = attention_mask.to(x.dtype) if attention_mask is not None else None
        for block in t.blocks:
            x = block(x, cos, sin, mask, cache if use_cache else None)
        x = t.ln_f(x)
        if isinstance(logits_to_keep, slice):  # these rows only (engine/fullattn_decode.py)
            x = x[:, logits_to_keep]
        elif logits_to_keep:
            x = x[:, -logits_to_keep:]
        return SimpleNamespace(logits=F.linear(x, self.lm_head.weight))


def _inv_freq(c: SimpleNamespace) -> torch.Tensor:
    d = c.head_dim
    return 1.0 / (c.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device="cpu") / d))


def load_llada1(directory: Path, raw: dict[str, Any], dtype: torch.dtype, quantize: str = "") -> LLaDA1:
    """Build the network from config.json and load its safetensors; raises ValueError with one
    line when a tensor is missing or has the wrong shape. quantize: as load_qwen's."""
    model = LLaDA1(raw, device="meta")
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    transform, reader = _quantizer(model, quantize, dtype, directory, raw)
    state = read_weights(directory, expected, transform=transform, reader=reader)
    model.load_state_dict(state if transform or reader else {k: v.to(dtype) for k, v in state.items()},
                          strict=False, assign=True)
    model.inv_freq = _inv_freq(model.c)
    model.generation_config = None
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()
