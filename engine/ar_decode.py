"""Autoregressive decoding with a KV cache, through the same event API as block decoding.

Each generated token is reported as its own committed "block" of one token.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

import torch

from .config import GenerationConfig
from .decode_loop import DecodeLoop, PrefillInfo, Unit, open_request, seeded_generator
from .events import DenoiseStep
from .healing import Healing
from .prefix_cache import Entry, PrefixCache
from .processors import process_logits
from .runtime import ForwardRunner, TextStreamer, hidden_token_ids, make_cache, reserve_cache
from .selection import select
from .settings import ARSettings

AR_PREFILL_CHUNK = 512


class ARDecoder:
    """One autoregressive generation under the shared loop (engine/decode_loop.py): each token
    is a unit of one. Iterate `run()` for events."""

    def __init__(self, lm, prompt_ids: list[int], cfg: GenerationConfig,
                 cancel: threading.Event | None = None, healing: Healing | None = None,
                 prefix: PrefixCache | None = None):
        """prefix: earlier requests' caches to start from and to keep this one's in (AR models
        reuse any common prefix, not only whole blocks; engine/prefix_cache.py)."""
        self.prompt, cfg = open_request(lm, prompt_ids, cfg, "autoregressive decoding")
        self.lm, self.cfg, self.cancel = lm, cfg, cancel
        self.settings: ARSettings = cfg.family
        self.healing = healing  # prompt_ids is healed; the first token is constrained
        self.eos = tuple(lm.eos_token_ids)
        self.device = lm.device
        self.run_forward = ForwardRunner(lm.model)
        self.prefix = prefix
        self.cached_ids: list[int] = []  # ids of the positions in the cache
        self._clean = True  # no forward half done: the cache holds exactly cached_ids
        self.streamer = TextStreamer(lm.tokenizer, hidden_token_ids(lm.tokenizer, self.eos, None),
                                     skip=healing.prefix if healing else "")
        self.generator = seeded_generator(self.device, cfg)
        self.info = PrefillInfo()

    def _forward(self, ids: torch.Tensor, start: int, cache, count: bool) -> torch.Tensor:
        positions = torch.arange(start, start + ids.numel(), device=self.device)
        self._clean = False
        logits = self.run_forward(ids, positions, cache, None, logits_to_keep=1, count=count)[-1]
        self.cached_ids.extend(ids.tolist())
        self._clean = True
        return logits

    def run(self) -> Iterator:
        n = len(self.prompt)
        loop = DecodeLoop(prompt=self.prompt, cfg=self.cfg, eos=self.eos, streamer=self.streamer,
                          runner=self.run_forward, cancel=self.cancel, prefill=self.info)
        reuse = None
        if self.prefix is not None and n > 1:  # the last prompt token is always run (its logits)
            reuse = self.prefix.take(self.prompt, ("ar",), n - 1,
                                     bool(getattr(self.lm.family, "recurrent", False)), need_row=False)
        cache = reuse.cache if reuse is not None else make_cache(self.lm.model)
        reserve_cache(cache, n + self.cfg.max_new_tokens + 1)
        self.reused = reuse.length if reuse is not None else 0
        self.cached_ids = self.prompt[:self.reused]
        self.info.reused, self.info.prefilled = self.reused, n - self.reused
        try:
            yield from loop.run(self._tokens(cache))
        finally:  # also when the consumer stops early or a cancel ends it
            if self.prefix is not None and self._clean:
                self.prefix.put(Entry(("ar",), self.cached_ids, cache))

    def _tokens(self, cache) -> Iterator:
        """The prefill, then a token at a time: a DenoiseStep and a Unit of one token each; the
        next token's forward runs when the loop asks for more."""
        cfg = self.cfg
        ids = torch.tensor(self.prompt, device=self.device)
        n = len(self.prompt)
        logits = None
        t_prefill = time.perf_counter()
        for c0 in range(self.reused, n, AR_PREFILL_CHUNK):
            c1 = min(n, c0 + AR_PREFILL_CHUNK)
            logits = self._forward(ids[c0:c1], c0, cache, count=c1 == n)  # the last chunk yields token 1
        self.info.seconds = time.perf_counter() - t_prefill
        generated: list[int] = []
        masked = torch.ones(1, dtype=torch.bool, device=self.device)
        for index in range(cfg.max_new_tokens):
            if index:
                logits = self._forward(torch.tensor([generated[-1]], device=self.device), n + index - 1,
                                       cache, count=True)
            processed = process_logits(logits[None], cfg, recent=generated, generated=len(generated),
                                       eos_ids=self.eos, progressive=self.settings.progressive_ending)
            if self.healing is not None and index == 0:
                processed = self.healing.constrain(processed[0])[None]
            tokens, _, _ = select(processed, masked, 0.0, cfg.temperature, None, self.generator, cfg.top_p)
            token = int(tokens[0])
            generated.append(token)
            yield DenoiseStep(index, 1, (token,), (False,), 1)
            yield Unit((token,), eos=token in self.eos)
