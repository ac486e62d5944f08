"""Route the model's hot paths to our kernels (docs/design.md, Boundaries: Triton on CUDA).

Two hooks, both installed only where the kernels run Triton (CUDA, or CLOVER_FORCE_TRITON=1 in
tests under TRITON_INTERPRET=1):

* attention: a registered transformers attention function. During a denoise step (flagged by
  the decoder) the block's queries see every cached position and the whole block, which is
  exactly `kernels.block_attention`; every other forward (prefill, commit, AR) goes to SDPA with
  its 4-D mask. On the CPU, transformers' networks get `gqa_sdpa`, which also reads no mask
  inside a denoise step.
* gated delta rule: transformers' Qwen3-Next / Qwen3.5 GDN layers call a module-level
  `torch_chunk_gated_delta_rule`; it is replaced by `kernels.gated_delta.chunk_gated_delta_rule`,
  which has the same signature and never writes its input state.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter
from typing import Any

_STATE = threading.local()
CALLS: Counter = Counter()  # which path each hooked call took (for tests and `clover bench`)
ATTENTION_NAME = "clover_block"
GQA_SDPA_NAME = "clover_sdpa"
GDN_MODULES = ("transformers.models.qwen3_next.modeling_qwen3_next",
               "transformers.models.qwen3_5.modeling_qwen3_5",
               "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")


@contextlib.contextmanager
def denoise_step(block_size: int):
    """Mark the forwards inside as denoise steps over one block of `block_size` queries."""
    _STATE.block = block_size
    try:
        yield
    finally:
        _STATE.block = 0


def _clover_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                      scaling: float | None = None, **kwargs):
    """query: [B, Hq, L, D]; key, value: [B, Hkv, P + L, D] -> ([B, L, Hq, D], None)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from clover_cli.kernels.block_attention import block_attention

    L = query.shape[2]
    if getattr(_STATE, "block", 0) == L and key.shape[2] >= L:
        P = key.shape[2] - L
        CALLS["block_attention"] += 1
        out = block_attention(query, key[:, :, :P], value[:, :, :P], key[:, :, P:], value[:, :, P:],
                              scale=scaling)  # [B, Hq, L, D]
        return out.transpose(1, 2).contiguous(), None
    CALLS["sdpa"] += 1
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, **kwargs)  # CUDA: GQA with a mask has no fused path


def gqa_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0,
             scaling: float | None = None, **_kwargs):
    """SDPA with grouped-query heads as they are (enable_gqa): transformers' own SDPA path
    repeats the key/value heads whenever a mask is given, a copy of the whole cache per layer
    and forward (docs/engine.md, "Static KV layout"). query [B, Hq, L, D], key/value
    [B, Hkv, S, D], 4-D additive mask -> ([B, L, Hq, D], None).

    Inside a denoise step the mask is not read: one block right after the cache sees every key,
    so its block-causal mask is all zeros. The decoder still passes it to transformers' networks
    (for None they would build a causal one; docs/engine.md, "Decoding rule")."""
    import torch.nn.functional as F

    mask = attention_mask
    if getattr(_STATE, "block", 0) == query.shape[2] and key.shape[2] >= query.shape[2]:
        CALLS["sdpa_no_mask"] += 1
        mask, causal = None, False
    else:
        if mask is not None and mask.dim() == 4:
            mask = mask[:, :, :, :key.shape[-2]]
        # as transformers: no mask means causal (its mask builder drops the mask only when that holds)
        causal = mask is None and query.shape[2] > 1 and getattr(module, "is_causal", True)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout,
                                         scale=scaling, is_causal=causal,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def install_gqa_attention(model: Any) -> bool:
    """Route a transformers network's attention on the CPU through gqa_sdpa (our own networks in
    engine/models already call SDPA that way; on CUDA, SDPA has no fused kernel for grouped heads
    with a mask, and the Triton hooks take the denoise steps); True when it was installed."""
    if hasattr(model, "make_cache") or not hasattr(model, "set_attn_implementation"):
        return False
    if next(model.parameters()).device.type != "cpu":
        return False
    if getattr(getattr(model, "config", None), "_attn_implementation", None) != "sdpa":
        return False
    _register(GQA_SDPA_NAME, gqa_sdpa)
    try:
        model.set_attn_implementation(GQA_SDPA_NAME)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def install_kernels(model: Any, *, force: bool = False) -> list[str]:
    """Install the hooks when the model runs on CUDA (or `force`); returns what was installed."""
    import torch

    from clover_cli.kernels._dispatch import use_triton

    param = next(model.parameters())
    if not (force or use_triton(param)):
        return []
    installed = []
    _register(ATTENTION_NAME, _clover_attention)
    try:
        model.set_attn_implementation(ATTENTION_NAME)
        installed.append("block_attention")
    except (ValueError, TypeError, AttributeError):  # our own modules (engine/models) use SDPA
        pass
    for name in GDN_MODULES:
        # only a GDN hybrid's own modeling module, already imported by its loading: a plain
        # attention model never pays for importing (or patching) the Qwen3-Next/3.5 modules
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "torch_chunk_gated_delta_rule"):
            module.torch_chunk_gated_delta_rule = _gated_delta
            installed.append(f"gated_delta:{name.rsplit('.', 1)[-1]}")
    del torch
    return installed


def _gated_delta(query, key, value, g, beta, chunk_size: int = 16, initial_state=None,
                 output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                 cu_seqlens=None, **_ignored):
    """transformers' call signature -> kernels.gated_delta (chunk size must divide 32)."""
    from clover_cli.kernels.gated_delta import chunk_gated_delta_rule

    CALLS["gated_delta"] += 1
    return chunk_gated_delta_rule(query, key, value, g, beta, initial_state=initial_state,
                                  output_final_state=output_final_state,
                                  chunk_size=chunk_size if 32 % chunk_size == 0 else 16,
                                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens)


def _register(name: str, fn) -> None:
    """Register an attention function under `name`, with SDPA's mask builder: transformers builds
    no mask at all for a name it does not know, and a query chunk after cached positions (a
    prefill continued from a reused prefix, a long AR prompt's second chunk) then attends
    top-left causally, to the wrong keys."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, sdpa_mask)
