"""Prefix reuse across requests (docs/engine.md, "Prefix reuse").

An agent step's prompt is the previous step's prompt and answer plus a little more. The engine
keeps the cache each request leaves behind, keyed by the token ids of the positions it holds, and
the next request starts from the longest prefix it shares with one of them, prefilling only the
rest. The idea is the one llama.cpp's server (`cache_prompt`), vLLM's automatic prefix caching and
SGLang's RadixAttention apply to autoregressive models; block diffusion makes it exact on the
block grid: a frozen block's keys/values depend only on the tokens up to its end, so any prefix
that ends on a block boundary is the cache an uncached run would have built there.

- Attention layers are StaticKV buffers (engine/models/state.py): a reused prefix is the same
  buffers with a shorter length. The request takes the entry (no copy); the part of it past the
  shared prefix is given up, and the request's own cache is kept when it ends.
- Recurrent (Gated DeltaNet) layers cannot be cut back, so an entry keeps their state at a few
  block boundaries (the prompt ends of its last requests) besides its end, as vLLM keeps hybrid
  models' state at block boundaries; a prefix is reused up to the largest such boundary.
- Shifted families (Fast-dLLM v2) predict a block's first token from the position before it;
  an entry keeps that logits row at its boundaries, and a prefix without it gives up one block.
- Memory is bounded: whole entries are evicted least recently used first when their bytes
  (attention buffers as allocated, states, rows) pass the budget.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch

from .runtime import (attention_layer_indices, cache_nbytes, recurrent_nbytes, restore_recurrent,
                      truncate_cache)

MAX_STATES = 4  # recurrent-state snapshots / logits rows an entry keeps besides its end (the latest)
DEFAULT_FRACTION = 0.25  # of the free memory of the model's device, when no budget is given
DEFAULT_CAP_BYTES = 16 << 30


@dataclass
class Entry:
    """A cache some request left behind: its attention layers hold positions [0, length)."""

    grid: tuple  # ("block", B) or ("ar",): caches are only valid on the grid that wrote them
    tokens: list[int]  # ids of positions [0, length)
    cache: Any
    states: dict[int, dict] = field(default_factory=dict)  # boundary -> recurrent layers there
    rows: dict[int, torch.Tensor] = field(default_factory=dict)  # boundary -> logits [V] of boundary-1
    used: int = 0  # LRU clock
    nbytes: int = 0

    @property
    def length(self) -> int:
        return len(self.tokens)


@dataclass
class Reuse:
    """What a request starts from: `cache` holds positions [0, length) of its prompt."""

    cache: Any
    length: int
    row: torch.Tensor | None  # logits of position length-1, when the entry kept them
    states: dict[int, dict]  # earlier boundaries' recurrent snapshots, carried into the next entry


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]: bisect on slice equality (C speed)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def default_budget_bytes(device: Any) -> int:
    """A quarter of the device's free memory (free VRAM on CUDA, MemAvailable on the CPU), at
    most 16 GiB."""
    free = 0
    try:
        if getattr(device, "type", str(device)).startswith("cuda"):
            free = torch.cuda.mem_get_info(device)[0]
        else:
            with open("/proc/meminfo") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        free = int(line.split()[1]) * 1024
                        break
    except (OSError, RuntimeError, ValueError):
        free = 0
    if not free:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = 4 << 30
    return int(min(free * DEFAULT_FRACTION, DEFAULT_CAP_BYTES))


def _truncatable(cache: Any) -> bool:
    """Can every attention layer be cut back to an earlier length (StaticKV)? A sliding-window
    layer has already dropped old positions."""
    layers = getattr(cache, "layers", [])
    return all(hasattr(layers[i], "truncate") for i in attention_layer_indices(cache))


class PrefixCache:
    """The caches of earlier requests, for the next request to start from. Not thread-safe (the
    engine runs one generation at a time)."""

    def __init__(self, budget_bytes: int):
        self.budget = max(0, int(budget_bytes))
        self.entries: list[Entry] = []
        self._clock = 0
        self.evictions = 0

    @property
    def bytes(self) -> int:
        return sum(e.nbytes for e in self.entries)

    def clear(self) -> None:
        """Forget every entry (a new conversation, another model)."""
        self.entries.clear()

    def _best(self, entry: Entry, ids: list[int], limit: int, recurrent: bool,
              need_row: bool) -> int:
        """The longest prefix of `ids` this entry can give: on its grid, at most `limit`, at a
        boundary with recurrent state (hybrids) and with its logits row where needed."""
        step = entry.grid[1] if entry.grid[0] == "block" else 1
        usable = min(common_prefix(entry.tokens, ids), limit)
        usable -= usable % step
        if recurrent or not _truncatable(entry.cache):
            points = sorted({entry.length, *entry.states}, reverse=True)
        else:
            points = range(usable, 0, -step)
        for point in points:
            if point > usable or point <= 0:
                continue
            if need_row and point == limit and point not in entry.rows:
                continue  # the request would need the row before its first block: one block less
            return point
        return 0

    def take(self, ids: list[int], grid: tuple, limit: int, recurrent: bool,
             need_row: bool) -> Reuse | None:
        """The cache of the entry sharing the longest usable prefix with `ids` (at most `limit`
        positions), cut back to that prefix and removed from the store (the request now owns
        it); None when no entry shares a whole block."""
        best, length = None, 0
        for entry in self.entries:
            if entry.grid != grid:
                continue
            got = self._best(entry, ids, limit, recurrent, need_row)
            if got > length:
                best, length = entry, got
        if best is None:
            return None
        self.entries.remove(best)
        cache = best.cache
        truncate_cache(cache, length)
        if length != best.length and best.states.get(length) is not None:
            restore_recurrent(cache, best.states[length])
        states = {b: s for b, s in best.states.items() if b < length}
        return Reuse(cache, length, best.rows.get(length), states)

    def put(self, entry: Entry) -> None:
        """Keep a finished request's cache; evict least recently used entries past the budget
        (an entry larger than the whole budget is not kept)."""
        if entry.length == 0 or self.budget <= 0:
            return
        for kept in (entry.states, entry.rows):  # the latest boundaries (and the end) only
            for boundary in sorted(b for b in kept if b != entry.length)[:-MAX_STATES]:
                del kept[boundary]
        entry.nbytes = (cache_nbytes(entry.cache) + sum(recurrent_nbytes(s) for s in entry.states.values())
                        + sum(r.numel() * r.element_size() for r in entry.rows.values()))
        if entry.nbytes > self.budget:
            self.evictions += 1
            return
        self._clock += 1
        entry.used = self._clock
        self.entries.append(entry)
        while self.bytes > self.budget:
            oldest = min(self.entries, key=lambda e: e.used)
            self.entries.remove(oldest)
            self.evictions += 1
