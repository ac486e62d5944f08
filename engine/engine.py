"""The engine facade: one streaming API for block-diffusion and autoregressive checkpoints."""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Iterator

from .ar_decode import ARDecoder
from .block_decode import BlockDecoder
from .config import GenerationConfig
from .events import GenerationResult
from .healing import heal_prompt


SMALL_MODEL_PARAMS = 50_000_000
THREADS_ENV = "CLOVER_TORCH_THREADS"


def configure_cpu_threads(model) -> int | None:
    """Pick torch's intra-op thread count for CPU decoding; returns it (None: left alone).

    A small model's matmuls are too short to split: measured on the 2-core machine with other
    work running, the bundled tiny model's forward took 11 ms on one thread and 54-84 ms on two,
    so small models decode on one thread. CLOVER_TORCH_THREADS overrides.
    """
    import torch

    param = next(model.parameters())
    if param.is_cuda:
        return None
    wanted = os.environ.get(THREADS_ENV, "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        threads = int(wanted)
    elif sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS:
        threads = 1
    else:
        return None
    torch.set_num_threads(threads)
    return threads


class Engine:
    """Decodes token ids into token ids for one LoadedModel; not thread-safe (one generation at a time)."""

    def __init__(self, lm, *, fuse_commit: bool = True, use_kernels: bool | None = None):
        """use_kernels: None installs the Triton hooks when the model is on CUDA; True forces them
        (tests under TRITON_INTERPRET=1); False never."""
        from .kernel_hooks import install_kernels

        self.lm = lm
        self.threads = configure_cpu_threads(lm.model)
        self.kernels = [] if use_kernels is False else install_kernels(lm.model, force=bool(use_kernels))
        # GDN hybrids fuse too: their recurrent layers split the fused input (recurrent_split.py)
        self.fuse_commit = fuse_commit

    def stream(self, prompt_ids: list[int], config: GenerationConfig | None = None,
               cancel: threading.Event | None = None) -> Iterator:
        """Yield DenoiseStep / BlockCommitted events; the last event is a GenerationResult."""
        cfg = config or GenerationConfig()
        healing = heal_prompt(self.lm, list(prompt_ids)) if cfg.token_healing else None
        ids = list(healing.prompt_ids) if healing else prompt_ids
        if self.lm.is_diffusion and (cfg.block_size or self.lm.block_size) >= 1:
            decoder = BlockDecoder(self.lm, ids, cfg, cancel, fuse_commit=self.fuse_commit,
                                   healing=healing)
        else:
            decoder = ARDecoder(self.lm, ids, cfg, cancel, healing=healing)
        if healing is None:
            return decoder.run()
        return _with_prompt(decoder.run(), tuple(prompt_ids))

    def generate(self, prompt_ids: list[int], config: GenerationConfig | None = None,
                 cancel: threading.Event | None = None) -> GenerationResult:
        result = None
        for event in self.stream(prompt_ids, config, cancel):
            result = event
        assert isinstance(result, GenerationResult)
        return result


def _with_prompt(events: Iterator, prompt_ids: tuple[int, ...]) -> Iterator:
    """The events of a healed generation, its result naming the prompt as the caller gave it."""
    for event in events:
        if isinstance(event, GenerationResult):
            event = dataclasses.replace(event, prompt_ids=prompt_ids)
        yield event
