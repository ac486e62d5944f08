"""Static KV layout (engine/models/state.py StaticKV, docs/engine.md "Static KV layout"): a
denoise step writes its block into buffers allocated once and forgets it by a length change, so
the bytes it allocates do not grow with the context; the cache is never copied per step."""
from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from clover_cli.engine.block_decode import BlockDecoder
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model
from clover_cli.engine.models.state import KVCache, StaticKV
from clover_cli.engine.runtime import DecodeMasks, make_cache, reserve_cache


def _step_bytes(lm, context: int) -> tuple[int, list]:
    """Bytes allocated by one denoise step over `context` cached positions (torch.profiler's
    memory view: every allocation event's size, frees not subtracted), and the step's logits."""
    B = lm.block_size
    prompt = torch.randint(10, 250, (context,), generator=torch.Generator().manual_seed(0)).tolist()
    dec = BlockDecoder(lm, prompt, GenerationConfig(max_new_tokens=B))
    cache = make_cache(lm.model)
    reserve_cache(cache, context + 3 * B)
    dec._masks = DecodeMasks(B, context + 3 * B, dec.dtype, dec.device)
    dec._prefill(cache, context)
    saved = dec_saved(cache)
    block = torch.full((B,), lm.mask_token_id, dtype=torch.long)
    block[:3] = torch.tensor(prompt[:3])
    dec._denoise(block, context, cache, saved)  # the first step builds the mask view once
    before = [layer.keys.data_ptr() for layer in _attention(cache)]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        logits = dec._denoise(block, context, cache, saved)
    assert [layer.keys.data_ptr() for layer in _attention(cache)] == before  # written in place
    assert all(layer.length == context for layer in _attention(cache))  # and forgotten again
    allocated = sum(e.cpu_memory_usage for e in prof.events() if e.cpu_memory_usage > 0)
    return allocated, logits


def dec_saved(cache):
    from clover_cli.engine.runtime import has_recurrent, snapshot_recurrent

    return snapshot_recurrent(cache) if has_recurrent(cache) else None


def _attention(cache) -> list:
    return [layer for layer in cache.layers if isinstance(layer, StaticKV)]


@pytest.mark.parametrize("kind", ["clover", "hybrid"])
def test_a_denoise_step_allocates_the_same_bytes_at_1k_and_11k_tokens(tiny_dirs, kind):
    lm = load_model(str(tiny_dirs[kind]), dtype="float32")
    Engine(lm)  # installs the engine's attention path (transformers' own repeats GQA heads)
    torch.set_num_threads(1)
    small, _ = _step_bytes(lm, 1024)
    large, _ = _step_bytes(lm, 11264)
    assert small == large
    assert small > 0  # the profiler saw the step's own allocations (logits, activations)


def test_static_kv_writes_in_place_and_grows_geometrically():
    cache = KVCache(1)
    layer = cache.layers[0]
    k = torch.randn(1, 2, 5, 4)
    keys, values = cache.update(k, k * 2, 0)
    assert torch.equal(keys, k) and torch.equal(values, k * 2) and cache.get_seq_length() == 5
    ptr, capacity = layer._kbuf.data_ptr(), layer.capacity
    step = torch.randn(1, 2, 3, 4)
    keys, _ = cache.update(step, step, 0)
    assert layer._kbuf.data_ptr() == ptr and torch.equal(keys[..., 5:, :], step)
    layer.truncate(5)  # a denoise step's block forgotten: no copy, the earlier positions intact
    assert torch.equal(layer.keys, k) and layer._kbuf.data_ptr() == ptr
    big = torch.randn(1, 2, capacity, 4)
    keys, _ = cache.update(big, big, 0)  # past the capacity: one grow, content kept
    assert layer.capacity >= capacity + capacity // 4 and torch.equal(keys[..., :5, :], k)
    assert torch.equal(keys[..., 5:, :], big)
    with pytest.raises(ValueError):
        layer.truncate(layer.length + 1)
    reserved = KVCache(1)
    reserved.layers[0].reserve(1000)  # asked before the first write: the first write allocates it
    reserved.update(k, k, 0)
    assert reserved.layers[0].capacity >= 1000
