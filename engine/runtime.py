"""Pieces both decoders share: masks, the timed forward, the cache, the text streamer."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch


def block_causal_mask(q_positions: torch.Tensor, kv_len: int, block_size: int,
                      dtype: torch.dtype) -> torch.Tensor:
    """Additive 4-D mask [1, 1, Q, KV]: query at p sees key at k iff block(k) <= block(p).

    A float mask (0 / finfo.min): transformers 5.24 silently mishandles bool 4-D masks on eager.
    Blocks sit at absolute positions (multiples of block_size).
    """
    kv_blocks = torch.arange(kv_len, device=q_positions.device) // block_size  # [KV]
    q_blocks = q_positions // block_size  # [Q]
    allowed = kv_blocks[None, :] <= q_blocks[:, None]  # [Q, KV]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=q_positions.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def make_cache(model: Any):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def crop_attention(cache: Any, tokens: int) -> None:
    """Drop the last `tokens` keys/values of every attention layer; recurrent layers are untouched
    (their state is put back by restore_recurrent instead)."""
    if tokens <= 0:
        return
    for layer in getattr(cache, "layers", []):
        if _is_recurrent(layer) and not hasattr(layer, "keys"):
            continue
        if getattr(layer, "is_initialized", True) and getattr(layer, "keys", None) is not None:
            layer.keys = layer.keys[..., :-tokens, :]
            layer.values = layer.values[..., :-tokens, :]


def snapshot_recurrent(cache: Any) -> dict[int, Any] | None:
    """Copy the recurrent (linear-attention / GDN) layers of a cache; None when there are none."""
    layers = getattr(cache, "layers", [])
    saved = {i: copy.deepcopy(layer) for i, layer in enumerate(layers) if _is_recurrent(layer)}
    return saved or None


def restore_recurrent(cache: Any, saved: dict[int, Any] | None) -> None:
    """Put back recurrent layers saved by snapshot_recurrent (attention KV is cropped instead)."""
    if not saved:
        return
    for i, layer in saved.items():
        cache.layers[i] = copy.deepcopy(layer)


def _is_recurrent(layer: Any) -> bool:
    return any(hasattr(layer, name) for name in ("recurrent_states", "conv_states", "linear_states"))


@dataclass
class ForwardRunner:
    """Runs model forwards, counting them and timing the seconds spent inside."""

    model: Any
    forwards: int = 0
    seconds: float = 0.0  # in counted forwards (those that decode)
    uncounted_seconds: float = 0.0  # in prefill forwards that produce no token
    sync: Any = field(default=None)

    def __call__(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache: Any,
                 attention_mask: torch.Tensor | None, logits_to_keep: int = 0,
                 count: bool = True) -> torch.Tensor:
        """input_ids, position_ids: [T] -> logits [K, V] (float32), K = T or logits_to_keep."""
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model(input_ids=input_ids[None], position_ids=position_ids[None],
                             attention_mask=attention_mask, cache=cache, use_cache=True,
                             logits_to_keep=logits_to_keep)
        logits = out.logits[0].float()  # [K, V]
        if logits.is_cuda:
            torch.cuda.synchronize(logits.device)
        if count:
            self.forwards += 1
            self.seconds += time.perf_counter() - start
        else:
            self.uncounted_seconds += time.perf_counter() - start
        return logits


class TextStreamer:
    """Turns a growing list of token ids into text deltas.

    Decodes the whole committed prefix each time and holds back a trailing U+FFFD, so a
    multi-byte character split between two blocks is emitted whole with the later block.
    """

    def __init__(self, tokenizer: Any, hidden_ids: set[int]):
        self.tokenizer = tokenizer
        self.hidden = hidden_ids
        self.emitted = ""

    def text_of(self, ids: list[int]) -> str:
        visible = [i for i in ids if i not in self.hidden]
        return self.tokenizer.decode(visible, skip_special_tokens=False)

    def delta(self, ids: list[int], final: bool = False) -> str:
        text = self.text_of(ids)
        if not final:
            while text.endswith("\ufffd"):
                text = text[:-1]
        if not text.startswith(self.emitted):
            # a rare re-tokenisation change of the prefix: emit only what is new past it
            common = 0
            for a, b in zip(text, self.emitted):
                if a != b:
                    break
                common += 1
            self.emitted = text[:common]
        out = text[len(self.emitted):]
        self.emitted = text
        return out


def hidden_token_ids(tokenizer: Any, eos_ids: tuple[int, ...], mask_id: int | None) -> set[int]:
    """Ids never shown as text: EOS, mask, pad, BOS."""
    hidden = set(eos_ids)
    for name in ("pad_token_id", "bos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            hidden.add(value)
    if mask_id is not None:
        hidden.add(mask_id)
    return hidden


def find_stop(text: str, stops: tuple[str, ...]) -> int:
    """Index of the earliest stop string in text, or -1."""
    hits = [text.find(s) for s in stops if s and s in text]
    return min(hits) if hits else -1
