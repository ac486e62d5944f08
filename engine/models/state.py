"""What the networks written here (engine/models/qwen.py, llada2.py) carry besides weights: a
small config object and their KV cache. Neither needs transformers, so loading the bundled model
imports none of it (docs/engine.md, "Startup").

The cache keeps the interface the decoders use on transformers' DynamicCache as well
(engine/runtime.py): `update(keys, values, layer)` appends along the sequence and returns the
layer's whole keys/values, `get_seq_length()`, and `layers[i].keys` / `.values`, which
crop_attention shortens in place of a crop method.
"""
from __future__ import annotations

from typing import Any

import torch


class KVLayer:
    """One attention layer's keys and values, [B, heads, T, head_dim]; None until written."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def is_initialized(self) -> bool:
        return self.keys is not None


class KVCache:
    """Keys/values per layer, grown by update and shortened by engine/runtime.py crop_attention."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [KVLayer() for _ in range(num_layers)]

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int):
        layer = self.layers[layer_idx]
        if layer.keys is None:
            layer.keys, layer.values = keys, values
        else:
            layer.keys = torch.cat([layer.keys, keys], dim=-2)
            layer.values = torch.cat([layer.values, values], dim=-2)
        return layer.keys, layer.values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        keys = self.layers[layer_idx].keys if self.layers else None
        return 0 if keys is None else keys.shape[-2]


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
