"""The engine facade: one streaming API for block-diffusion and autoregressive checkpoints."""
from __future__ import annotations

import dataclasses
import threading
from typing import Iterator

from .config import GenerationConfig
from .edit_decode import editing_wanted
from .events import GenerationResult
from .families import settled
from .healing import heal_prompt
from .prefix_cache import PrefixCache, default_budget_bytes
from .threads import SMALL_MODEL_PARAMS, THREADS_ENV, ThreadGovernor, apply_cpu_threads  # noqa: F401


def configure_cpu_threads(model) -> int | None:
    """Set torch's intra-op thread count for CPU decoding and return it; None for a CUDA model
    (left alone). The policy is engine/threads.py's (docs/engine.md, "CPU threads")."""
    choice = apply_cpu_threads(model)
    return None if choice is None else choice.threads


class Engine:
    """Decodes token ids into token ids for one LoadedModel; not thread-safe (one generation at a time)."""

    def __init__(self, lm, *, fuse_commit: bool | None = None, use_kernels: bool | None = None,
                 cache_mb: float | None = None):
        """fuse_commit: run a finished block's commit and the next block's first step as one
        forward; None: the family's rule (always in float32 / float64; in half precision where
        its row allows, `FamilyRow.fuse_in_half`). use_kernels: None installs the Triton hooks
        when the model is on CUDA; True forces them
        (tests under TRITON_INTERPRET=1); False never. cache_mb: the memory kept for earlier
        requests' caches, which later requests sharing a prefix start from (engine/prefix_cache.py);
        None: a quarter of the device's free memory (at most 16 GiB); 0: every request cold."""
        from .kernel_hooks import install_gqa_attention, install_kernels

        if cache_mb is not None and cache_mb < 0:
            raise ValueError(f"cache_mb must be >= 0, got {cache_mb}")
        self.lm = lm
        choice = apply_cpu_threads(lm.model)  # what configure_cpu_threads does, keeping the reason
        self.threads = None if choice is None else choice.threads  # None: a CUDA model, untouched
        self.threads_reason = None if choice is None else choice.reason
        self._governor = ThreadGovernor(sum(p.numel() for p in lm.model.parameters()), choice)
        # DiffusionGemma keeps transformers' attention: its reference runs on it
        # (engine/gemma_decode.py); Dream / LLaDA 1.x attend in full, so no block-causal kernels
        own_attention = lm.family.row.own_attention  # the family table (engine/families.py)
        self.kernels = ([] if use_kernels is False or own_attention
                        else install_kernels(lm.model, force=bool(use_kernels)))
        if not self.kernels and not own_attention:
            install_gqa_attention(lm.model)
        # GDN hybrids fuse too: their recurrent layers split the fused input (recurrent_split.py)
        half = str(next(lm.model.parameters()).dtype) in ("torch.bfloat16", "torch.float16")
        self.fuse_commit = (not half or lm.family.row.fuse_in_half) if fuse_commit is None else fuse_commit
        budget = default_budget_bytes(lm.device) if cache_mb is None else int(cache_mb * (1 << 20))
        self.prefix_cache = PrefixCache(budget)

    def clear_cache(self) -> None:
        """Forget every earlier request's cache (a new conversation, /clear)."""
        self.prefix_cache.clear()

    def stream(self, prompt_ids: list[int], config: GenerationConfig | None = None,
               cancel: threading.Event | None = None, *, reuse: bool = True) -> Iterator:
        """Yield DenoiseStep / BlockCommitted events; the last event is a GenerationResult.
        reuse: start from the longest prefix an earlier request's cache shares with the prompt,
        and keep this request's cache for later ones (False: neither)."""
        cfg = settled(self.lm, config or GenerationConfig())  # SettingsError: not this family's
        choice = self._governor.refresh()  # other work since the last request (engine/threads.py)
        if choice is not None:
            self.threads, self.threads_reason = choice.threads, choice.reason
        row = self.lm.family.row  # its decoder (the family table, engine/families.py)
        if not row.prompt_reuse:  # DiffusionGemma, Dream, LLaDA 1.x: no healing, no prefix reuse
            return row.decoder_class()(self.lm, list(prompt_ids), cfg, cancel).run()
        healing = heal_prompt(self.lm, list(prompt_ids)) if cfg.token_healing else None
        ids = list(healing.prompt_ids) if healing else list(prompt_ids)
        prefix = self.prefix_cache if reuse and self.prefix_cache.budget > 0 else None
        if self.lm.is_diffusion:  # editing: LLaDA2.1 (edit_decode.py), one line for another family
            decoder = row.decoder_class(editing=editing_wanted(self.lm, cfg))(
                self.lm, ids, cfg, cancel, fuse_commit=self.fuse_commit, healing=healing, prefix=prefix)
        else:
            decoder = row.decoder_class()(self.lm, ids, cfg, cancel, healing=healing, prefix=prefix)
        if healing is None:
            return decoder.run()
        return _with_prompt(decoder.run(), tuple(prompt_ids))

    def generate(self, prompt_ids: list[int], config: GenerationConfig | None = None,
                 cancel: threading.Event | None = None, *, reuse: bool = True) -> GenerationResult:
        result = None
        for event in self.stream(prompt_ids, config, cancel, reuse=reuse):
            result = event
        assert isinstance(result, GenerationResult)
        return result


def _with_prompt(events: Iterator, prompt_ids: tuple[int, ...]) -> Iterator:
    """The events of a healed generation, its result naming the prompt as the caller gave it."""
    for event in events:
        if isinstance(event, GenerationResult):
            event = dataclasses.replace(event, prompt_ids=prompt_ids)
        yield event
