"""Autoregressive decoding with a KV cache, through the same event API as block decoding.

Each generated token is reported as its own committed "block" of one token.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

import torch

from .config import GenerationConfig
from .events import BlockCommitted, DenoiseStep, GenerationResult, GenerationStats
from .healing import Healing
from .prefix_cache import Entry, PrefixCache
from .processors import process_logits, repeated_block
from .runtime import (ForwardRunner, TextStreamer, find_stop, hidden_token_ids,
                      make_cache, reserve_cache)
from .selection import select

AR_PREFILL_CHUNK = 512


class ARDecoder:
    def __init__(self, lm, prompt_ids: list[int], cfg: GenerationConfig,
                 cancel: threading.Event | None = None, healing: Healing | None = None,
                 prefix: PrefixCache | None = None):
        """prefix: earlier requests' caches to start from and to keep this one's in (AR models
        reuse any common prefix, not only whole blocks; engine/prefix_cache.py)."""
        if not prompt_ids:
            raise ValueError("empty prompt")
        self.lm, self.cfg, self.cancel = lm, cfg, cancel
        self.prompt = list(prompt_ids)
        self.healing = healing  # prompt_ids is healed; the first token is constrained
        self.eos = tuple(lm.eos_token_ids)
        self.device = lm.device
        self.run_forward = ForwardRunner(lm.model)
        self.prefix = prefix
        self.cached_ids: list[int] = []  # ids of the positions in the cache
        self._clean = True  # no forward half done: the cache holds exactly cached_ids
        self.streamer = TextStreamer(lm.tokenizer, hidden_token_ids(lm.tokenizer, self.eos, None),
                                     skip=healing.prefix if healing else "")
        self.generator = None
        if cfg.temperature > 0:
            self.generator = torch.Generator(device=self.device)
            self.generator.manual_seed(cfg.seed if cfg.seed is not None else int(time.time_ns() % 2**63))

    def _forward(self, ids: torch.Tensor, start: int, cache, count: bool) -> torch.Tensor:
        positions = torch.arange(start, start + ids.numel(), device=self.device)
        self._clean = False
        logits = self.run_forward(ids, positions, cache, None, logits_to_keep=1, count=count)[-1]
        self.cached_ids = self.cached_ids + ids.tolist()
        self._clean = True
        return logits

    def run(self) -> Iterator:
        t0 = time.perf_counter()
        n = len(self.prompt)
        reuse = None
        if self.prefix is not None and n > 1:  # the last prompt token is always run (its logits)
            reuse = self.prefix.take(self.prompt, ("ar",), n - 1,
                                     bool(getattr(self.lm.family, "recurrent", False)), need_row=False)
        cache = reuse.cache if reuse is not None else make_cache(self.lm.model)
        reserve_cache(cache, n + self.cfg.max_new_tokens + 1)
        self.reused = reuse.length if reuse is not None else 0
        self.cached_ids = self.prompt[:self.reused]
        try:
            yield from self._decode(cache, t0)
        finally:  # also when the consumer stops early or a cancel ends it
            if self.prefix is not None and self._clean:
                self.prefix.put(Entry(("ar",), self.cached_ids, cache))

    def _decode(self, cache, t0: float) -> Iterator:
        cfg = self.cfg
        ids = torch.tensor(self.prompt, device=self.device)
        n = len(self.prompt)
        logits = None
        t_prefill = time.perf_counter()
        for c0 in range(self.reused, n, AR_PREFILL_CHUNK):
            c1 = min(n, c0 + AR_PREFILL_CHUNK)
            logits = self._forward(ids[c0:c1], c0, cache, count=c1 == n)  # the last chunk yields token 1
        prefill_seconds = time.perf_counter() - t_prefill
        first_block = 0.0
        generated: list[int] = []
        finish = "length"
        masked = torch.ones(1, dtype=torch.bool, device=self.device)
        for index in range(cfg.max_new_tokens):
            if self.cancel is not None and self.cancel.is_set():
                finish = "cancelled"
                break
            processed = process_logits(logits[None], cfg, recent=generated, generated=len(generated),
                                       eos_ids=self.eos)
            if self.healing is not None and index == 0:
                processed = self.healing.constrain(processed[0])[None]
            tokens, _, _ = select(processed, masked, 0.0, cfg.temperature, None, self.generator, cfg.top_p)
            token = int(tokens[0])
            generated.append(token)
            yield DenoiseStep(index, 1, (token,), (False,), 1)
            first_block = first_block or time.perf_counter() - t0
            yield BlockCommitted(index, (token,), self.streamer.delta(generated))
            if token in self.eos:
                finish = "eos"
                break
            if cfg.stop and find_stop(self.streamer.text_of(generated), cfg.stop) >= 0:
                finish = "stop"
                break
            if cfg.repetition_penalty > 1.0 and len(generated) >= 64 and repeated_block(
                    [tuple(generated[-64:-32]), tuple(generated[-32:])], self.eos):
                finish = "repetition"
                break
            if index + 1 == cfg.max_new_tokens:
                break
            logits = self._forward(torch.tensor([token], device=self.device), n + index, cache, count=True)
        text = self.streamer.text_of(generated)
        if cfg.stop:
            cut = find_stop(text, cfg.stop)
            if cut >= 0:
                finish, text = "stop", text[:cut]
        stats = GenerationStats(
            generated_tokens=len(generated), forwards=self.run_forward.forwards, blocks=len(generated),
            steps_per_block=tuple([1] * len(generated)), forward_seconds=self.run_forward.seconds,
            total_seconds=time.perf_counter() - t0, prompt_tokens=n, prefill_seconds=prefill_seconds,
            reused_tokens=self.reused, prefilled_tokens=n - self.reused, first_block_seconds=first_block)
        yield GenerationResult(tuple(generated), text, finish, stats, tuple(self.prompt))
