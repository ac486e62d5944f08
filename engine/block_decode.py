"""Block-diffusion decoding with an exact KV cache (docs/engine.md).

Blocks of `block_size` positions at absolute offsets. The prompt's whole blocks are prefilled
block-causally in chunks; its tail sits, fixed, at the start of the first decode block. Each
denoise step runs the block against the cache (bidirectional inside the block), commits every
masked position whose confidence is strictly above the threshold (else the single most confident
one), and leaves the cache as it was. A finished block is written to the cache by one forward,
fused by default with step 0 of the next block (the next block's queries see the committed block
computed in the same pass; GDN layers split their input so only the block enters their state).
Ideas follow Fast-dLLM v2 (Wu et al. 2025) and SDAR (Cheng et al. 2025).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from .config import GenerationConfig
from .decode_loop import DecodeLoop, PrefillInfo, Unit, open_request, seeded_generator
from .kernel_hooks import denoise_step
from .events import DenoiseStep
from .healing import Healing
from .prefix_cache import Entry, PrefixCache
from .processors import process_logits
from .recurrent_split import install_recurrent_split, split_recurrent
from .runtime import (DecodeMasks, ForwardRunner, TextStreamer, attention_layer_indices,
                      block_causal_mask, crop_attention, has_recurrent, hidden_token_ids,
                      make_cache, mask_is_zero, reserve_cache, restore_recurrent, snapshot_recurrent)
from .selection import select, softmax_dtype
from .settings import BlockSettings
from .transfer_schedule import at_least, transfer_schedule

PREFILL_CHUNK_TOKENS = 1024  # a long prompt never needs one giant attention matrix


class BlockDecoder:
    """One generation of a block-diffusion model. Iterate `run()` for events."""

    def __init__(self, lm, prompt_ids: list[int], cfg: GenerationConfig,
                 cancel: threading.Event | None = None, fuse_commit: bool = True,
                 healing: Healing | None = None, prefix: PrefixCache | None = None):
        """healing: prompt_ids is healing.prompt_ids and the first generated token is constrained
        (engine/healing.py). prefix: earlier requests' caches to start from and to leave this
        request's cache in (engine/prefix_cache.py)."""
        self.prompt, cfg = open_request(lm, prompt_ids, cfg, "block decoding")
        self.lm, self.cfg, self.cancel = lm, cfg, cancel
        self.settings: BlockSettings = cfg.family
        self.healing = healing
        self.B = cfg.block_size or lm.block_size
        self.mask_id = lm.mask_token_id
        family = lm.family
        self.eos = tuple(family.stop_ids if family.stop_ids is not None else lm.eos_token_ids)
        self.shifted = family.shifted_logits
        self.recurrent = family.recurrent
        self.first_token_rule = family.first_token_rule
        self.sub = min(self.B, self.settings.sub_block_size or family.sub_block or self.B)
        self.mask_in_softmax = family.mask_in_softmax
        # LLaDA2: a budget under its 32 steps makes each step commit more (transfer_schedule.py)
        self.schedule = transfer_schedule(self.B, family.steps, cfg.max_new_tokens)
        # a hybrid fuses only when every GDN layer can split its input (recurrent_split.py); the
        # first-token rule needs the commit's logits before the next block's first step
        self.fuse = (fuse_commit and not self.first_token_rule
                     and (not self.recurrent or install_recurrent_split(lm.model) > 0))
        self.device = lm.device
        self._index = torch.arange(self.B, device=self.device)  # block positions 0..B-1
        self.dtype = next(lm.model.parameters()).dtype
        self.softmax_dtype = softmax_dtype(family.row.confidence_dtype, self.dtype)
        self.run_forward = ForwardRunner(lm.model)
        # our networks (engine/models) take no mask where it would be all zeros (a denoise step);
        # transformers' would build a causal one for None, so they keep the zero mask, which our
        # attention hooks skip inside a denoise step (kernel_hooks.py)
        self.mask_free = bool(getattr(lm.model, "mask_free_forward", False))
        self.cached = 0  # positions whose keys/values (and GDN state) are in the cache
        self.cached_ids: list[int] = []  # the ids of those positions
        self.prefix = prefix
        self.reused = 0  # prompt positions taken from an earlier request's cache
        self._clean = True  # the cache holds exactly `cached` positions (no forward half done)
        self.info = PrefillInfo()  # the prefill's seconds and counts, for the stats
        self._last_row = None  # logits of position cached-1 (kept with the cache for shifted families)
        self._mask_key = None  # (start, length, cached) of the last forward's positions and mask
        self._positions = self._mask = None
        self._masks: DecodeMasks | None = None  # decode masks as views (set up by run())
        self._attn: tuple[int, list[int]] | None = None  # (layer count, attention layer indices)
        self.processing = cfg.repetition_penalty > 1.0 or self.settings.progressive_ending
        self.streamer = TextStreamer(lm.tokenizer, hidden_token_ids(lm.tokenizer, self.eos, self.mask_id),
                                     skip=healing.prefix if healing else "")
        self.generator = seeded_generator(self.device, cfg)

    # -- forwards -------------------------------------------------------------------------
    def _forward(self, tokens: torch.Tensor, start: int, cache, keep: int = 0, count: bool = True):
        """Run tokens [T] at absolute positions start.. against the cache; returns logits [K, V]."""
        key = (start, tokens.numel(), self.cached)
        if self._mask_key != key:  # every denoise step of a block runs the same shapes: reuse them
            positions = torch.arange(start, start + tokens.numel(), device=self.device)
            self._mask_key, self._positions = key, positions
            kv_len = self.cached + tokens.numel()
            if self.mask_free and mask_is_zero(start, tokens.numel(), kv_len, self.B):
                self._mask = None  # every query sees every key: no mask to build or read
            else:
                view = self._masks.get(start, tokens.numel(), kv_len) if self._masks else None
                self._mask = view if view is not None else block_causal_mask(positions, kv_len, self.B,
                                                                             self.dtype)
        return self.run_forward(tokens, self._positions, cache, self._mask, logits_to_keep=keep,
                                count=count, is_causal=False if self._mask is None else None)

    def _prefill(self, cache, end: int) -> torch.Tensor | None:
        """Write prompt[cached:end] (whole blocks) into the cache in block-aligned chunks."""
        blocks = self.settings.prefill_chunk_blocks or max(1, PREFILL_CHUNK_TOKENS // self.B)
        chunk = blocks * self.B
        last = None
        ids = torch.tensor(self.prompt[:end], device=self.device)
        self._clean = False
        for c0 in range(self.cached, end, chunk):
            c1 = min(end, c0 + chunk)
            last = self._forward(ids[c0:c1], c0, cache, keep=1, count=False)[-1]
            self.cached = c1
        self.cached_ids = self.prompt[:end]
        self._clean = True
        return last  # logits of position end-1 (used by shifted families)

    def _denoise(self, block: torch.Tensor, start: int, cache, saved) -> torch.Tensor:
        """A denoise step reads the cache and leaves it unchanged (KV cropped, GDN restored)."""
        self._clean = False
        with denoise_step(block.numel()):
            logits = self._forward(block, start, cache)
        self._crop(cache, block.numel())
        restore_recurrent(cache, saved)
        self._clean = True
        return logits

    def _commit(self, block: torch.Tensor, start: int, cache, with_next: bool):
        """Write the finished block's KV (and GDN state). With `with_next`, the same forward also
        runs step 0 of the next (all-masked) block. Returns (carry logits [V], next logits | None)."""
        self._clean = False
        if not with_next:
            logits = self._forward(block, start, cache, count=True)
            self._committed(block)
            return logits[-1], None
        masks = torch.full((self.B,), self.mask_id, device=self.device, dtype=block.dtype)
        with split_recurrent(self.B if self.recurrent else 0):
            logits = self._forward(torch.cat([block, masks]), start, cache)
        self._crop(cache, self.B)  # the next block's keys/values are not committed
        self._committed(block)
        return logits[self.B - 1], logits[self.B:]

    def _committed(self, block: torch.Tensor) -> None:
        self.cached += self.B
        self.cached_ids.extend(block.tolist())
        self._clean = True

    def _crop(self, cache, tokens: int) -> None:
        """crop_attention with the attention layers' indices found once per cache layout."""
        count = len(getattr(cache, "layers", []))
        if self._attn is None or self._attn[0] != count:
            self._attn = (count, attention_layer_indices(cache))
        crop_attention(cache, tokens, self._attn[1])

    # -- the loop (engine/decode_loop.py owns the endings, the events' text and the result) ----
    def run(self) -> Iterator:
        B = self.B
        loop = DecodeLoop(prompt=self.prompt, cfg=self.cfg, eos=self.eos, streamer=self.streamer,
                          runner=self.run_forward, cancel=self.cancel, prefill=self.info)
        n = len(self.prompt)
        limit = n + self.cfg.max_new_tokens
        start = (n // B) * B
        reuse = None
        if self.prefix is not None and start:
            reuse = self.prefix.take(self.prompt, ("block", B), start, self.recurrent,
                                     need_row=self.shifted)
        cache = reuse.cache if reuse is not None else make_cache(self.lm.model)
        recurrent_cache = has_recurrent(cache)  # (layers a cache adds lazily never are)
        reserve_cache(cache, limit + 2 * B)  # every position of this request: no growth mid-way
        self._masks = DecodeMasks(B, limit + 2 * B, self.dtype, self.device)
        carry = None
        if reuse is not None:
            self.cached = self.reused = reuse.length
            self.cached_ids = self.prompt[:reuse.length]
            carry = reuse.row
        t_prefill = time.perf_counter()
        if start > self.cached:
            carry = self._prefill(cache, start)
        self.info.seconds = time.perf_counter() - t_prefill if start else 0.0  # with masks
        self.info.reused, self.info.prefilled = self.reused, max(0, start - self.reused)
        states = dict(reuse.states) if reuse is not None else {}
        rows = {start: carry} if carry is not None else {}
        try:
            yield from loop.run(self._blocks(cache, start, carry, recurrent_cache, states))
        finally:  # also when the consumer stops early or a cancel ends it
            if self.prefix is not None and self._clean and len(self.cached_ids) == self.cached:
                rows[self.cached] = self._last_row
                rows = {b: r for b, r in rows.items() if r is not None} if self.shifted else {}
                self.prefix.put(Entry(("block", B), self.cached_ids, cache, states, rows))

    def _blocks(self, cache, start: int, carry, recurrent_cache: bool, states: dict) -> Iterator:
        """Block after block from `start`: open it, denoise it (DenoiseStep events), give out its
        output as a Unit, and, when the loop asks for more, write it to the cache."""
        B = self.B
        n = len(self.prompt)
        limit = n + self.cfg.max_new_tokens
        self._last_row = carry
        generated: list[int] = []
        pending = None  # the next block's step-0 logits when the commit was fused with it
        block_index = 0
        while start < limit:
            fixed = max(0, n - start)  # prompt tail inside this block
            end = min(B, limit - start)  # the output is cut here; the whole block is decoded
            block, masked = self._open_block(start, fixed, carry, block_index, generated)
            saved = snapshot_recurrent(cache) if recurrent_cache else None
            if saved is not None and block_index == 0:
                states[start] = saved  # the state after this prompt: a boundary the next request may reuse
            step = _Step(block_index, fixed, end, start, cache, saved, carry, generated)
            block, eos_at = yield from self._denoise_block(block, masked, step, pending)
            new = block[fixed:(eos_at + 1 if eos_at >= 0 else end)].tolist()
            generated.extend(new)
            yield Unit(tuple(new), eos=eos_at >= 0)
            if start + B >= limit:
                return
            carry, pending = self._commit(block, start, cache, with_next=self.fuse)
            self._last_row = carry
            start += B
            block_index += 1

    def _open_block(self, start: int, fixed: int, carry, block_index: int, generated: list[int]):
        """(block ids, masked): the prompt tail fixed, the rest masked; for Fast-dLLM v2 the
        previous position's argmax opens the block, committed before any denoise step (also
        right after a prefill that ends on a block boundary)."""
        B = self.B
        block = torch.full((B,), self.mask_id, dtype=torch.long, device=self.device)
        if fixed:
            block[:fixed] = torch.tensor(self.prompt[start:start + fixed], device=self.device)
        masked = torch.zeros(B, dtype=torch.bool, device=self.device)
        masked[fixed:] = True
        if self.first_token_rule and not fixed and carry is not None:
            row = carry
            if self.processing:  # repetition control / progressive ending, as for any step
                row = process_logits(carry[None], self.cfg, recent=generated, generated=len(generated),
                                     progressive=self.settings.progressive_ending,
                                     eos_ids=self.eos)[0]
            if self.healing is not None and block_index == 0:
                row = self.healing.constrain(row)
            block[0] = self._argmax(row)
            masked[0] = False
        return block, masked

    def _step_logits(self, block, masked, step: "_Step", pending, heal: bool) -> torch.Tensor:
        """One step's logits [B, V] for the block: the fused commit's when given, else a denoise
        forward; shifted for the families that predict i from i-1; processed (repetition
        control, progressive ending); the first generated token healed when `heal`."""
        logits = pending if pending is not None else self._denoise(block, step.start, step.cache,
                                                                   step.saved)
        if self.shifted:  # logits at i-1 predict token i
            first = step.carry if step.carry is not None else logits[0]
            logits = torch.cat([first[None], logits[:-1]])
        if self.processing:
            fixed, end = step.fixed, step.end
            recent = step.generated + block[fixed:end][~masked[fixed:end]].tolist()
            logits = process_logits(logits, self.cfg, recent=recent, generated=len(recent),
                                    progressive=self.settings.progressive_ending,
                                    eos_ids=self.eos)
        if self.healing is not None and step.block_index == 0 and heal:
            logits = logits.clone()  # the first generated token continues the prompt's text
            logits[step.fixed] = self.healing.constrain(logits[step.fixed])
        return logits

    def _denoise_block(self, block, masked, step: "_Step", pending):
        """Denoise steps until the block's output positions are committed (or an EOS ends it):
        each yields a DenoiseStep; returns (block, eos_at: the block index of the EOS that ends
        the generation, or -1)."""
        cfg, fixed, end = self.cfg, step.fixed, step.end
        selected_stop = not self.first_token_rule  # Fast-dLLM ends only on a *selected* stop
        # ...and decodes the whole last block: a stop selected past the budget ends the generation
        # at an earlier stop the first-token rule committed (the loop cuts after the first one)
        beyond = (not selected_stop and end < self.B
                  and self._holds_stop(step.generated + block[fixed:end][~masked[fixed:end]].tolist()))
        live = masked  # masked positions selection may pick (eos_confine narrows it)
        steps = 0
        # positions past `end` only matter until then (or until a stop is selected, `beyond`)
        while bool(masked[fixed:end].any()) or (beyond and not selected_stop and bool(masked.any())):
            logits = self._step_logits(block, masked, step, pending, heal=bool(masked[fixed]))
            pending = None
            tokens, confidence, commit = select(
                logits, self._selectable(live), cfg.threshold, cfg.temperature, self.mask_id,
                self.generator, cfg.top_p, mask_in_softmax=self.mask_in_softmax,
                softmax_dtype=self.softmax_dtype)
            if self.schedule is not None:
                share = self.schedule[min(steps, len(self.schedule) - 1)]
                commit = at_least(commit, confidence, self._selectable(live), cfg.threshold, share)
            block = torch.where(commit, tokens, block)
            masked = masked & ~commit
            steps += 1
            toks, still = block[fixed:end].tolist(), masked[fixed:end].tolist()
            yield DenoiseStep(step.block_index, steps, tuple(toks), tuple(still), int(commit.sum()))
            if not selected_stop and self.eos:
                selected_stop = any(t in self.eos for t in block[commit].tolist())
            eos_at, first_eos = self._eos_done(toks, still, fixed)
            if eos_at >= 0 and selected_stop:
                return block, eos_at
            if beyond and selected_stop and not bool(masked[fixed:end].any()):
                return block, end - 1  # ends here; the loop cuts after the earlier stop
            live = masked
            if self.settings.eos_confine and first_eos >= 0:
                live = masked & (self._index < first_eos)
                if not bool(live.any()):  # every position before it committed (a first-token stop)
                    return block, first_eos
        return block, -1

    def _argmax(self, logits: torch.Tensor) -> int:
        """The greedy token of one row [V]; the mask token is never a prediction."""
        row = logits.float().clone()
        row[self.mask_id] = float("-inf")
        return int(row.argmax())

    def _holds_stop(self, ids: list[int]) -> bool:
        """Whether ids hold an EOS / stop id."""
        return any(t in self.eos for t in ids)

    def _selectable(self, live: torch.Tensor) -> torch.Tensor:
        """The live positions of the current sub-block (the first one still holding a masked
        position; Fast-dLLM v2 decodes its sub-blocks in order), or all of them."""
        if self.sub >= self.B:
            return live
        where = torch.nonzero(live).flatten()
        if where.numel() == 0:
            return live
        lo = int(where[0]) // self.sub * self.sub
        return live & (self._index >= lo) & (self._index < lo + self.sub)

    def _eos_done(self, toks: list[int], still: list[bool], fixed: int) -> tuple[int, int]:
        """(done, first): block index of the first committed EOS, as `done` when every position
        before it is committed (else done = -1), and as `first` in any case (-1: none).
        toks/still: the decodable part of the block and its masked flags (plain lists: a
        32-element scan in Python is cheaper than the tensor ops on a small model)."""
        if not self.eos:
            return -1, -1
        gap = False
        for i, (tok, is_masked) in enumerate(zip(toks, still)):
            if is_masked:
                gap = True  # a masked position before any committed EOS: keep decoding
            elif tok in self.eos:
                return (-1 if gap else fixed + i), fixed + i
        return -1, -1


@dataclass(frozen=True)
class _Step:
    """Where a block's steps run: its index, prompt tail and output end, its place in the cache
    and the state a step puts back, the carried logits row, the output before it."""

    block_index: int
    fixed: int
    end: int
    start: int
    cache: Any
    saved: Any
    carry: Any
    generated: list
