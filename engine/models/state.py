"""What the networks written here (engine/models/qwen.py, llada2.py) carry besides weights: a
small config object and their KV cache. Neither needs transformers, so loading the bundled model
imports none of it (docs/engine.md, "Startup").

The cache keeps the interface the decoders use on transformers' DynamicCache as well
(engine/runtime.py): `update(keys, values, layer)` appends along the sequence and returns the
layer's whole keys/values, `get_seq_length()`, and `layers[i].keys` / `.values`. Its layers are
StaticKV: buffers written in place, shortened by `truncate` (the same layer class replaces
transformers' DynamicLayer in the caches the engine makes for transformers' networks).
"""
from __future__ import annotations

from typing import Any

import torch


GROW_ALIGN = 256  # buffer lengths are multiples of this many positions


class StaticKV:
    """One attention layer's keys and values in buffers allocated once and written in place
    (docs/engine.md, "Static KV layout").

    `keys` / `values` are views [B, heads, length, head_dim] of buffers [B, heads, capacity,
    head_dim]. `update` copies new positions in at `length` and returns the views, so a denoise
    step allocates nothing that grows with the context; `truncate` forgets positions without a
    copy (a denoise step's block, or a reused prefix's divergent tail). The buffers grow (one
    copy) only when a write passes the capacity, to max(what `reserve` asked, 1.25x), so a
    conversation that grows step by step copies its cache a logarithmic number of times.
    Mixed into our KVLayer and into transformers' DynamicLayer (engine/runtime.py make_cache).
    """

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None
    length: int = 0
    wanted: int = 0  # capacity asked for by reserve before the first write

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._kbuf is None else self._kbuf[..., :self.length, :]

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:  # transformers' layer __init__ sets None
        if value is not None:
            raise TypeError("a static KV layer is written through update(), not assigned")
        self._kbuf, self.length = None, 0

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._vbuf is None else self._vbuf[..., :self.length, :]

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        if value is not None:
            raise TypeError("a static KV layer is written through update(), not assigned")
        self._vbuf = None

    @property
    def capacity(self) -> int:
        return 0 if self._kbuf is None else self._kbuf.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes of the buffers (allocated capacity, not only the used length)."""
        if self._kbuf is None:
            return 0
        return self._kbuf.numel() * self._kbuf.element_size() * 2

    def reserve(self, positions: int) -> None:
        """Make room for `positions` positions (now, or at the first write)."""
        self.wanted = max(self.wanted, positions)
        if self._kbuf is not None and positions > self.capacity:
            self._grow(positions)

    def _grow(self, needed: int) -> None:
        old = self.capacity
        size = max(needed, self.wanted, old + old // 4)
        size = -(-size // GROW_ALIGN) * GROW_ALIGN
        k, v = self._kbuf, self._vbuf
        shape = (*k.shape[:-2], size, k.shape[-1])
        self._kbuf = k.new_empty(shape)
        self._vbuf = v.new_empty((*v.shape[:-2], size, v.shape[-1]))
        self._kbuf[..., :self.length, :].copy_(k[..., :self.length, :])
        self._vbuf[..., :self.length, :].copy_(v[..., :self.length, :])

    def update(self, keys: torch.Tensor, values: torch.Tensor, *args: Any, **kwargs: Any):
        """Write keys/values [B, heads, T, head_dim] after the cached positions; returns the
        views of every cached position, these included."""
        t = keys.shape[-2]
        end = self.length + t
        if self._kbuf is None:
            size = -(-max(end, self.wanted) // GROW_ALIGN) * GROW_ALIGN
            self._kbuf = keys.new_empty((*keys.shape[:-2], size, keys.shape[-1]))
            self._vbuf = values.new_empty((*values.shape[:-2], size, values.shape[-1]))
            self.is_initialized = True
        elif end > self.capacity:
            self._grow(end)
        self._kbuf[..., self.length:end, :].copy_(keys)
        self._vbuf[..., self.length:end, :].copy_(values)
        self.length = end
        return self._kbuf[..., :end, :], self._vbuf[..., :end, :]

    def truncate(self, length: int) -> None:
        """Keep the first `length` positions (no copy: later writes overwrite the rest)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate {self.length} cached positions to {length}")
        self.length = length

    def get_seq_length(self, *args: Any) -> int:
        return self.length


class KVLayer(StaticKV):
    """Our networks' attention layer cache (engine/models/qwen.py, llada2.py)."""

    def __init__(self) -> None:
        self.is_initialized = False


class KVCache:
    """Keys/values per layer in place (StaticKV); shortened by engine/runtime.py crop_attention."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [KVLayer() for _ in range(num_layers)]

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int):
        return self.layers[layer_idx].update(keys, values)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.layers[layer_idx].length if self.layers else 0


class ModelConfig:
    """The attributes callers read on `model.config` (those of transformers' config that the
    engine and its tests use: sizes, `_attn_implementation`) and `to_dict`."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self._attn_implementation = "sdpa"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class OwnNetwork:
    """What both networks written here (engine/models/qwen.py, llada2.py) offer the engine
    besides forward: their output head and a fresh KV cache of their own (engine/runtime.py
    make_cache). Mixed into the nn.Module; needs `self.c.num_hidden_layers` and `self.lm_head`."""

    def get_output_embeddings(self):
        return self.lm_head

    def make_cache(self) -> KVCache:
        return KVCache(self.c.num_hidden_layers)
