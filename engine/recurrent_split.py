"""Fused commit for GDN hybrids: split each recurrent layer's sequence inside one model forward.

A fused commit runs `[finished block ; next block, all masked]` in one forward (docs/engine.md).
Attention layers handle that with the 4-D mask, but a Gated DeltaNet layer is causal and folds
every token it sees into its recurrent and conv state, so the masks would leak into the
committed state. Inside `split_recurrent(n)`, each GDN layer runs its input as two calls of the
layer's own forward: the first `n` tokens against the cache (their state is kept: that is the
commit), then the rest from that state (the state they produce is thrown away). The output is
what two separate forwards give, the model still makes one pass, and the next block's step 0
costs no extra forward. Layers are recognised by transformers' `*GatedDeltaNet` modules
(Qwen3-Next, Qwen3.5, Qwen3.5-MoE), whose forward is `(hidden_states, cache, attention_mask, **kw)`.
"""
from __future__ import annotations

import contextlib
import copy
import threading
from typing import Any

_STATE = threading.local()
_MARK = "_clover_split_layers"  # set on the model: how many GDN layers were wrapped


@contextlib.contextmanager
def split_recurrent(n: int):
    """Within the block, recurrent layers keep the state after the first `n` tokens only."""
    _STATE.split = n
    try:
        yield
    finally:
        _STATE.split = 0


def is_gdn_layer(module: Any) -> bool:
    return type(module).__name__.endswith("GatedDeltaNet") and hasattr(module, "layer_idx")


def install_recurrent_split(model: Any) -> int:
    """Wrap every GDN layer of `model` (once per model: every generation asks, so the module
    walk is not repeated); returns how many layers can split (0: none)."""
    count = getattr(model, _MARK, None)
    if count is not None:
        return count
    count = 0
    for module in model.modules():
        if is_gdn_layer(module):
            module.forward = _make_split_forward(module, module.forward)
            count += 1
    setattr(model, _MARK, count)
    return count


def _cut(mask: Any, lo: int, hi: int | None) -> Any:
    """A 2-D padding mask [B, T] follows the split; anything else (None, 4-D) passes unchanged."""
    if mask is not None and getattr(mask, "dim", lambda: 0)() == 2:
        return mask[:, lo:hi]
    return mask


def _make_split_forward(module: Any, forward: Any):
    """Other keyword arguments pass to both halves unchanged: transformers gives GDN layers no
    per-token tensors besides the mask in a single-sequence forward."""
    import torch

    def split_forward(hidden_states, cache=None, attention_mask=None, **kwargs):
        n = getattr(_STATE, "split", 0)
        if not n or cache is None or hidden_states.shape[1] <= n:
            return forward(hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)
        head = forward(hidden_states[:, :n], cache=cache, attention_mask=_cut(attention_mask, 0, n),
                       **dict(kwargs))
        committed = copy.deepcopy(cache.layers[module.layer_idx])  # state after the first n tokens
        tail = forward(hidden_states[:, n:], cache=cache, attention_mask=_cut(attention_mask, n, None),
                       **dict(kwargs))
        cache.layers[module.layer_idx] = committed
        return torch.cat([head, tail], dim=1)  # [B, T, H]

    return split_forward
