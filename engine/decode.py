"""The engine facade: one streaming API for block-diffusion and autoregressive checkpoints."""
from __future__ import annotations

import threading
from typing import Iterator

from .ar_decode import ARDecoder
from .block_decode import BlockDecoder
from .config import GenerationConfig
from .events import GenerationResult


class Engine:
    """Decodes token ids into token ids for one LoadedModel; not thread-safe (one generation at a time)."""

    def __init__(self, lm, *, fuse_commit: bool = True, use_kernels: bool | None = None):
        """use_kernels: None installs the Triton hooks when the model is on CUDA; True forces them
        (tests under TRITON_INTERPRET=1); False never."""
        from .kernel_hooks import install_kernels

        self.lm = lm
        self.kernels = [] if use_kernels is False else install_kernels(lm.model, force=bool(use_kernels))
        # GDN layers are causal: a fused [block ; next masks] forward would fold the masks into the
        # recurrent state, so recurrent families commit with a separate forward.
        self.fuse_commit = fuse_commit and not lm.family.recurrent

    def stream(self, prompt_ids: list[int], config: GenerationConfig | None = None,
               cancel: threading.Event | None = None) -> Iterator:
        """Yield DenoiseStep / BlockCommitted events; the last event is a GenerationResult."""
        cfg = config or GenerationConfig()
        if self.lm.is_diffusion and (cfg.block_size or self.lm.block_size) >= 1:
            decoder = BlockDecoder(self.lm, prompt_ids, cfg, cancel, fuse_commit=self.fuse_commit)
        else:
            decoder = ARDecoder(self.lm, prompt_ids, cfg, cancel)
        return decoder.run()

    def generate(self, prompt_ids: list[int], config: GenerationConfig | None = None,
                 cancel: threading.Event | None = None) -> GenerationResult:
        result = None
        for event in self.stream(prompt_ids, config, cancel):
            result = event
        assert isinstance(result, GenerationResult)
        return result
