"""Pieces the decoders share: masks, the timed forward, the cache, the text streamer."""
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


def mask_is_zero(start: int, tokens: int, kv_len: int, block_size: int) -> bool:
    """Is the block-causal mask of `tokens` queries at start.. over kv_len keys all zeros? It is
    when the keys are the cache up to `start` and these queries, and the queries sit in one block:
    a denoise step (one block at a block boundary right after the cache), a commit not fused with
    the next block, a one-block prefill chunk. Such a forward needs no mask (docs/engine.md,
    "Decoding rule"); two blocks of queries (a fused commit) or a longer prefill chunk do."""
    if tokens <= 0 or kv_len != start + tokens:
        return False
    return start // block_size == (start + tokens - 1) // block_size


class DecodeMasks:
    """Block-causal masks of decode forwards (a block, or a block and the next: at most 2 x block
    size queries) as views of one buffer per query count. Networks that take no mask
    (block_decode.py `mask_free`) get none for a one-block forward (mask_is_zero); the others get
    the zero view, which our attention hooks skip inside a denoise step (kernel_hooks.py).

    A decode forward's T queries start right after the cache, at a block boundary, so its mask
    [1, 1, T, cached + T] is zeros over the cached keys (every earlier block is visible) and a
    fixed T x T block-causal tail. With the tail at the right end of a zero buffer as wide as the
    generation can grow, each mask is a view of the buffer's last cached + T columns: no
    allocation per forward (AR mode builds one per token). Equal to block_causal_mask (tested)."""

    def __init__(self, block_size: int, capacity: int, dtype: torch.dtype, device: Any):
        self.B, self.capacity, self.dtype, self.device = block_size, capacity, dtype, device
        self.buffers: dict[int, torch.Tensor] = {}

    def get(self, start: int, tokens: int, kv_len: int) -> torch.Tensor | None:
        """The mask of `tokens` queries at start.. over kv_len keys; None when this forward is
        not of that shape (the caller builds it with block_causal_mask)."""
        if (start % self.B or kv_len != start + tokens or kv_len > self.capacity
                or tokens > 2 * self.B):  # prefill chunks: transient masks, no kept buffer
            return None
        buf = self.buffers.get(tokens)
        if buf is None:
            buf = torch.zeros((1, 1, tokens, self.capacity), dtype=self.dtype, device=self.device)
            tail = torch.arange(tokens, device=self.device)
            buf[..., self.capacity - tokens:] = block_causal_mask(tail, tokens, self.B, self.dtype)
            self.buffers[tokens] = buf
        return buf[..., self.capacity - kv_len:]


def make_cache(model: Any):
    """A fresh cache for `model`: its own (the networks in engine/models) or transformers',
    whose full-attention layers are then StaticKV layers too (written in place, docs/engine.md
    "Static KV layout"); other layer kinds (GDN, sliding window) stay transformers' own."""
    own = getattr(model, "make_cache", None)
    if own is not None:
        return own()
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=model.config)
    layer_class = _static_dynamic_layer()
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer:
            cache.layers[i] = layer_class()
    if getattr(cache, "layer_class_to_replicate", None) is DynamicLayer:
        cache.layer_class_to_replicate = layer_class
    return cache


_STATIC_LAYER: list[type] = []


def _static_dynamic_layer() -> type:
    """transformers' DynamicLayer with StaticKV storage (made once, on first use: importing
    transformers' cache module is only paid by models that load through transformers)."""
    if not _STATIC_LAYER:
        from transformers.cache_utils import DynamicLayer

        from .models.state import StaticKV

        class StaticDynamicLayer(StaticKV, DynamicLayer):
            def lazy_initialization(self, key_states, value_states) -> None:
                pass  # the buffers are made by the first update

            def crop(self, max_length: int) -> None:  # transformers' meaning: < 0 drops that many
                keep = self.length + max_length if max_length < 0 else min(max_length, self.length)
                self.truncate(max(0, keep))

            def reset(self) -> None:
                self.truncate(0)

        _STATIC_LAYER.append(StaticDynamicLayer)
    return _STATIC_LAYER[0]


def reserve_cache(cache: Any, positions: int) -> None:
    """Ask every in-place attention layer for room for `positions` positions."""
    for layer in getattr(cache, "layers", []):
        if hasattr(layer, "reserve"):
            layer.reserve(positions)


def truncate_cache(cache: Any, length: int) -> None:
    """Keep the first `length` positions of every attention layer (recurrent layers untouched)."""
    for i in attention_layer_indices(cache):
        layer = cache.layers[i]
        have = layer.get_seq_length() if hasattr(layer, "get_seq_length") else 0
        crop_attention_layer(layer, have - length)


def cache_nbytes(cache: Any) -> int:
    """Bytes a cache holds: attention buffers as allocated, recurrent states."""
    total = 0
    for layer in getattr(cache, "layers", []):
        if hasattr(layer, "nbytes"):
            total += layer.nbytes
        elif _is_recurrent(layer):
            total += recurrent_nbytes(layer)
        else:
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if isinstance(t, torch.Tensor):
                    total += t.numel() * t.element_size()
    return total


def recurrent_nbytes(layer: Any) -> int:
    """Bytes of one recurrent layer's conv and recurrent states (or of a snapshot's layers)."""
    if isinstance(layer, dict):
        return sum(recurrent_nbytes(v) for v in layer.values())
    total = 0
    for name in ("conv_states", "recurrent_states"):
        for t in (getattr(layer, name, None) or {}).values():
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


def attention_layer_indices(cache: Any) -> list[int]:
    """Indices of the cache layers that hold keys/values (what crop_attention trims)."""
    return [i for i, layer in enumerate(getattr(cache, "layers", []))
            if not (_is_recurrent(layer) and not hasattr(layer, "keys"))]


def crop_attention(cache: Any, tokens: int, indices: list[int] | None = None) -> None:
    """Drop the last `tokens` keys/values of every attention layer; recurrent layers are untouched
    (their state is put back by restore_recurrent instead). indices: attention_layer_indices of
    this cache, when the caller keeps them (a per-step saving on small models)."""
    if tokens <= 0:
        return
    layers = getattr(cache, "layers", [])
    for i in (attention_layer_indices(cache) if indices is None else indices):
        crop_attention_layer(layers[i], tokens)


def crop_attention_layer(layer: Any, tokens: int) -> None:
    """One layer's last `tokens` positions dropped: a StaticKV layer forgets them (no copy);
    another layer kind (sliding window) is shortened by slicing."""
    if tokens <= 0:
        return
    if hasattr(layer, "truncate"):
        layer.truncate(max(0, layer.length - tokens))  # (a scripted test model writes nothing)
        return
    keys = getattr(layer, "keys", None)
    if keys is not None and getattr(layer, "is_initialized", True):
        layer.keys = keys[..., :-tokens, :]
        layer.values = layer.values[..., :-tokens, :]


def snapshot_recurrent(cache: Any) -> dict[int, Any] | None:
    """Copy the recurrent (linear-attention / GDN) layers of a cache; None when there are none."""
    layers = getattr(cache, "layers", [])
    saved = {i: copy.deepcopy(layer) for i, layer in enumerate(layers) if _is_recurrent(layer)}
    return saved or None


def has_recurrent(cache: Any) -> bool:
    """Does the cache hold recurrent (linear-attention / GDN) layers?"""
    return any(_is_recurrent(layer) for layer in getattr(cache, "layers", []))


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
                 count: bool = True, is_causal: bool | None = None) -> torch.Tensor:
        """input_ids, position_ids: [T] -> logits [K, V] (float32; float64 for a float64 model, as
        the conformance references keep them), K = T or logits_to_keep. is_causal: passed to the
        model when given (False with no mask: every query sees every key, for the networks that
        take it, engine/models)."""
        extra = {} if is_causal is None else {"is_causal": is_causal}
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model(input_ids=input_ids[None], position_ids=position_ids[None],
                             attention_mask=attention_mask, cache=cache, use_cache=True,
                             logits_to_keep=logits_to_keep, **extra)
        logits = out.logits[0]  # [K, V]
        if logits.dtype != torch.float64:
            logits = logits.float()
        self.done(start, logits, count)
        return logits

    def done(self, start: float, logits: torch.Tensor, count: bool = True) -> None:
        """Book a forward that began at perf_counter() `start` and gave `logits` (a decoder that
        calls its network itself, with other arguments, times it here too)."""
        if logits.is_cuda:
            torch.cuda.synchronize(logits.device)
        if count:
            self.forwards += 1
            self.seconds += time.perf_counter() - start
        else:
            self.uncounted_seconds += time.perf_counter() - start


class TextStreamer:
    """Turns a growing list of token ids into text deltas.

    Incremental where the tokenizer allows it: `tokenizers`' DecodeStream (kept over decoding the
    whole answer again at every block, which cost 3.4 s over a 32K-token answer) holds back a
    character split between two blocks until it is whole. A tokenizer without a `tokenizers`
    backend, or one whose decode rewrites text afterwards (clean_up_tokenization_spaces), decodes
    the whole committed prefix each time and holds back a trailing U+FFFD instead; so does a
    stream whose ids stop extending the ones it has seen. `text_of` is the whole text, for stop
    strings and the final result.
    """

    def __init__(self, tokenizer: Any, hidden_ids: set[int], skip: str = ""):
        """skip: text the generated ids start with that is not theirs to show (a healed
        prompt's removed text, engine/healing.py)."""
        self.tokenizer = tokenizer
        self.hidden = hidden_ids
        self.skip = skip
        self.emitted = ""  # the text given out so far (skip removed)
        self._raw = ""  # the streamed text before `skip` is removed
        self._seen = 0  # how many of the ids the stream has consumed
        self._last = None  # the last of them (ids that stop extending it end the stream)
        self._backend = _stream_backend(tokenizer)
        self._stream = None
        if self._backend is not None:
            from tokenizers.decoders import DecodeStream

            self._stream = DecodeStream(skip_special_tokens=False)

    def text_of(self, ids: list[int]) -> str:
        visible = [i for i in ids if i not in self.hidden]
        text = self.tokenizer.decode(visible, skip_special_tokens=False)
        if self.skip and text.startswith(self.skip):
            text = text[len(self.skip):]
        return text

    def delta(self, ids: list[int], final: bool = False) -> str:
        if self._stream is not None and len(ids) >= self._seen and (
                not self._seen or ids[self._seen - 1] == self._last):
            out = self._stream_delta(ids, final)
            if out is not None:
                return out
        return self._whole_delta(ids, final)

    def _stream_delta(self, ids: list[int], final: bool) -> str | None:
        """The new text by DecodeStream; None when the stream cannot go on (it then stays off)."""
        try:
            for token in ids[self._seen:]:
                if token in self.hidden:
                    continue
                piece = self._stream.step(self._backend, int(token))
                if piece:
                    self._raw += piece
        except Exception:  # noqa: BLE001 - an id the backend cannot decode: decode as a whole
            self._stream = None
            return None
        self._seen = len(ids)
        self._last = ids[-1] if ids else None
        text = self._raw
        if self.skip:
            if len(text) < len(self.skip) and self.skip.startswith(text) and not final:
                return ""  # still inside the healed prefix
            text = text[len(self.skip):] if text.startswith(self.skip) else text
        if final:  # what the stream still holds back (an unfinished character) is whole now
            whole = self.text_of(ids)
            if whole.startswith(self.emitted):
                out = whole[len(self.emitted):]
                self.emitted = whole
                return out
            return self._whole_delta(ids, final)
        if not text.startswith(self.emitted):
            return None
        out = text[len(self.emitted):]
        self.emitted = text
        return out

    def _whole_delta(self, ids: list[int], final: bool) -> str:
        self._stream = None  # from here on the ids are decoded as a whole
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


def _stream_backend(tokenizer: Any):
    """The `tokenizers.Tokenizer` a DecodeStream can step with, when the tokenizer's own decode
    is exactly that backend's decode; else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or bool(getattr(tokenizer, "clean_up_tokenization_spaces", False)):
        return None
    try:
        from tokenizers import Tokenizer
        from tokenizers.decoders import DecodeStream  # noqa: F401 - tokenizers >= 0.21
    except ImportError:
        return None
    return backend if isinstance(backend, Tokenizer) else None


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
