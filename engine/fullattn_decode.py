"""Decoding of full-attention diffusion models: Dream 7B and LLaDA 1.x (docs/engine.md,
"Full-attention diffusion").

Neither has a block structure of its own: every position attends to every other, so nothing
computed for a committed token stays valid once another token changes, and a KV cache is an
approximation by nature. Three modes:

- `exact`: the family's own generate, token for token. Dream: `diffusion_generate` (Ye et al.
  2025, Dream-org/Dream `generation_utils.py`): the whole answer is one masked canvas; `steps`
  steps on the schedule linspace(1, eps); each step commits the most confident masked positions
  by `alg` (`origin`, `maskgit_plus`, `topk_margin`, `entropy`); logits shifted by one. LLaDA:
  `generate` (Nie et al. 2025, ML-GSAI/LLaDA `generate.py`): semi-autoregressive blocks of
  `block_length`, `steps` spread evenly over the blocks, each step commits its scheduled
  number of most confident positions (the rest stay masked: "low_confidence" remasking). No
  cache: every step runs the whole sequence.
- `prefix` / `dual`: Fast-dLLM v1 (Wu et al. 2025, NVlabs/Fast-dLLM `dream/`, `llada/`): blocks
  of 32; each block starts with one forward over the whole sequence whose keys/values are kept;
  the block's later steps run only the block (dual: the cache keeps the suffix too, the block's
  own entries replaced) or the block and everything after it (prefix: cache of the prefix
  only). A step commits its most confident masked position and every other one whose confidence
  is at least the threshold. Approximate with respect to `exact` by design; token-identical to
  Fast-dLLM v1's own generate.

Every mode reads the ideas from the public reference code (read to learn, not copied). Output
ends after the first committed EOS once every position before it is committed (committed tokens
never change, so decoding further could not change the output), and is cut at max_new_tokens.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

import torch
import torch.nn.functional as F

from .config import GenerationConfig
from .decode_loop import DecodeLoop, Unit, open_request, seeded_generator
from .events import DenoiseStep
from .fullattn_parts import (DEFAULT_MODE, DREAM_ALGS, FULL_ATTENTION, MODE_LABELS, MODES,  # noqa: F401
                             KVSnapshot, generation_defaults, mode_label, resolve_mode, sample_tokens)
from .runtime import ForwardRunner, TextStreamer, hidden_token_ids
from .settings import LladaSettings, ModeSettings

class FullAttnDecoder:
    """One generation of a Dream or LLaDA 1.x checkpoint. Iterate `run()` for events."""

    def __init__(self, lm, prompt_ids: list[int], cfg: GenerationConfig,
                 cancel: threading.Event | None = None, *, dream: bool | None = None):
        """dream: decode as Dream's references (else LLaDA 1.x's); None: as the family's logits
        say (Dream's are shifted, LLaDA's are not). The mode, steps and Dream's alg are the
        family's settings (cfg.family: ModeSettings; LLaDA 1.x's LladaSettings add remasking and
        cfg_scale, its exact generate's own options: ValueError, one line, in another mode)."""
        self.prompt, cfg = open_request(lm, prompt_ids, cfg, "diffusion decoding")
        self.lm, self.cfg, self.cancel = lm, cfg, cancel
        self.settings: ModeSettings = cfg.family
        self.mode = resolve_mode(lm.family.name, self.settings.diffusion_mode)
        self.dream = lm.family.shifted_logits if dream is None else dream
        self.mask_id = lm.mask_token_id
        self.eos = tuple(lm.eos_token_ids)
        self.device = lm.device
        self.gen = generation_defaults(lm)
        self.B = cfg.block_size or 32  # Fast-dLLM v1's and our LLaDA default block_length
        llada = self.settings if isinstance(self.settings, LladaSettings) else LladaSettings()
        self.remasking, self.cfg_scale = llada.remasking, llada.cfg_scale
        if (self.remasking != "low_confidence" or self.cfg_scale) and (self.dream or self.mode != "exact"):
            raise ValueError("random remasking and cfg_scale are LLaDA's exact decode's options "
                             "(a LLaDA 1.x checkpoint with --diffusion-mode exact)")
        self.generator = seeded_generator(self.device, cfg, cfg.temperature > 0 or self.remasking == "random"
                                          or (self.dream and self.mode == "exact" and self._alg() == "origin"))
        self.runner = ForwardRunner(lm.model)  # times the forwards (the network is called here)
        self.streamer = TextStreamer(lm.tokenizer, hidden_token_ids(lm.tokenizer, self.eos, self.mask_id))
        self.n = len(self.prompt)
        steps = self.settings.diffusion_steps
        if self.mode == "exact" and not self.dream and steps:  # LLaDA: checked up front
            blocks = -(-cfg.max_new_tokens // self.B)
            if steps % blocks:
                raise ValueError(f"diffusion steps ({steps}) must be a multiple of the "
                                 f"number of blocks ({blocks})")

    # -- settings ------------------------------------------------------------------------
    def _alg(self) -> str:
        alg = self.settings.diffusion_alg or self.gen.get("alg") or "origin"
        if alg not in DREAM_ALGS:
            raise ValueError(f"unknown Dream alg {alg!r} (choose from {', '.join(DREAM_ALGS)})")
        return alg

    def _top_p(self) -> float | None:
        return self.cfg.top_p if self.cfg.top_p < 1.0 else None

    def _top_k(self) -> int | None:
        k = self.gen.get("top_k")
        return int(k) if isinstance(k, int) and k > 0 else None

    # -- forwards ------------------------------------------------------------------------
    def _forward(self, ids: torch.Tensor, start: int, cache=None, first: int | None = None,
                 last: int | None = None) -> torch.Tensor:
        """ids [T] at positions start.. -> logits [last - first, V] of positions first..last-1
        (default: all), in the model's dtype. Dream's are shifted (position p gets what p-1
        predicts; the forward's first position keeps its own, as the reference). Only the rows
        asked for go through the output head: with a long prompt and canvas and a large
        vocabulary, the head over every row would be most of the forward's time and memory."""
        t0 = time.perf_counter()
        t = ids.numel()
        lo = 0 if first is None else first - start
        hi = t if last is None else last - start
        shifted = self.dream and lo >= 1  # the rows before: what positions lo..hi-1 see
        rows = slice(lo - 1, hi - 1) if shifted else slice(lo, hi)
        positions = torch.arange(start, start + t, device=self.device)
        with torch.inference_mode():
            out = self.lm.model(input_ids=ids[None], position_ids=positions[None], attention_mask=None,
                                cache=cache, use_cache=cache is not None,
                                logits_to_keep=0 if rows == slice(0, t) else rows)
        logits = out.logits[0]  # [hi - lo, V]
        self.runner.done(t0, logits)
        if self.dream and not shifted:
            logits = torch.cat([logits[:1], logits[:-1]])
        return logits

    # -- the loop (engine/decode_loop.py owns the endings, the events' text and the result) ----
    def run(self) -> Iterator:
        loop = DecodeLoop(prompt=self.prompt, cfg=self.cfg, eos=self.eos, streamer=self.streamer,
                          runner=self.runner, cancel=self.cancel)
        yield from loop.run(self._units())

    def _units(self) -> Iterator:
        """The mode's steps (a DenoiseStep each), and a Unit whenever generated positions became
        final; ends when the output is whole or the steps are spent."""
        cfg = self.cfg
        if self.dream and self.mode == "exact":
            gen_length = cfg.max_new_tokens
        else:
            gen_length = -(-cfg.max_new_tokens // self.B) * self.B
        x = torch.full((self.n + gen_length,), self.mask_id, dtype=torch.long, device=self.device)
        x[:self.n] = torch.tensor(self.prompt, device=self.device)
        self.x = x
        self.emitted = 0  # generated positions already given out as Units
        if self.dream and self.mode == "exact":
            steps_iter = self._dream_exact(gen_length)
        elif self.mode == "exact":
            steps_iter = self._llada_exact(gen_length)
        else:
            steps_iter = self._fast_dllm(gen_length)
        for block_index, step, lo, hi, committed in steps_iter:
            yield DenoiseStep(block_index, step, tuple(x[lo:hi].tolist()),
                              tuple((x[lo:hi] == self.mask_id).tolist()), committed)
            unit, done = self._ready()
            if unit is not None:
                yield unit
            if done:
                return
        unit, _ = self._ready(final=True)
        if unit is not None:
            yield unit

    def _ready(self, final: bool = False) -> tuple[Unit | None, bool]:
        """(the generated positions that became final as a Unit, or None; whether the output is
        whole). Final positions: the committed run from the start of the answer, cut after its
        first EOS and at max_new_tokens. final: the steps are spent; a position left masked
        stays in the output as the mask id, as in the reference's."""
        gen = self.x[self.n:self.n + self.cfg.max_new_tokens].tolist()
        ready = 0
        eos = False
        for tok in gen:
            if tok == self.mask_id and not final:
                break
            ready += 1
            if tok in self.eos:
                eos = True
                break
        if ready <= self.emitted:
            return None, ready == len(gen)
        unit = Unit(tuple(gen[self.emitted:ready]), eos=eos)
        self.emitted = ready
        return unit, ready == len(gen)

    # -- Dream: diffusion_generate -------------------------------------------------------
    def exact_steps(self, gen_length: int) -> int:
        """Dream exact's step count: --diffusion-steps, else generation_config.json's `steps`,
        else one per generated position."""
        return self.settings.diffusion_steps or int(self.gen.get("steps") or gen_length)

    def _dream_exact(self, gen_length: int):
        cfg, x = self.cfg, self.x
        steps = self.exact_steps(gen_length)
        eps = float(self.gen.get("eps") if self.gen.get("eps") is not None else 1e-3)
        alg = self._alg()
        alg_temp = self.gen.get("alg_temp")
        timesteps = torch.linspace(1, eps, steps + 1, device=self.device)
        for i in range(steps):
            mask_index = x == self.mask_id
            if not bool(mask_index.any()):
                break
            logits = self._forward(x, 0, first=self.n)  # [gen_length, V]: the prompt has no masks
            mask_logits = logits[mask_index[self.n:]]
            t, s = timesteps[i], timesteps[i + 1]
            before = int(mask_index.sum())
            if alg == "origin":
                p_transfer = 1 - s / t if i < steps - 1 else 1
                x0 = torch.zeros_like(x[mask_index]) + self.mask_id
                move = torch.rand(x0.shape, device=self.device, generator=self.generator) < p_transfer
                _, x0[move] = sample_tokens(mask_logits[move], cfg.temperature, self._top_p(),
                                            self._top_k(), self.generator)
                x[mask_index] = x0.clone()
            else:
                confidence, x0 = sample_tokens(mask_logits, cfg.temperature, self._top_p(), self._top_k(),
                                               self.generator, margin=alg == "topk_margin",
                                               entropy=alg == "entropy")
                num_mask = mask_index.sum() / 1  # float, as the reference's per-row mean
                count = int(num_mask * (1 - s / t)) if i < steps - 1 else int(num_mask)
                full = torch.full_like(x, float("-inf"), dtype=logits.dtype)
                full[mask_index] = confidence
                if count > 0:
                    if not alg_temp:
                        chosen = torch.topk(full, count).indices
                    else:
                        chosen = torch.multinomial(F.softmax(full / alg_temp, dim=-1), count,
                                                   generator=self.generator)
                    proposal = torch.full_like(x, self.mask_id)
                    proposal[mask_index] = x0
                    x[chosen] = proposal[chosen]
            yield 0, i + 1, self.n, self.n + min(gen_length, self.cfg.max_new_tokens), \
                before - int((x == self.mask_id).sum())

    # -- LLaDA: generate -----------------------------------------------------------------
    def _llada_choice(self, logits: torch.Tensor):
        """LLaDA's proposal per row: argmax (with Gumbel noise, drawn in float64, when sampling)
        and the softmax probability of it, in each reference's own dtype: `exact` follows
        ML-GSAI's generate.py (the logits' dtype: bfloat16 confidences tie and round as there),
        `prefix` / `dual` Fast-dLLM v1's get_transfer_index (float64)."""
        noisy = logits
        if self.cfg.temperature > 0:
            logits64 = logits.to(torch.float64)
            noise = torch.rand(logits64.shape, dtype=torch.float64, device=self.device,
                               generator=self.generator)
            noisy = logits64.exp() / (-torch.log(noise)) ** self.cfg.temperature
        x0 = torch.argmax(noisy, dim=-1)
        p = F.softmax(logits if self.mode == "exact" else logits.to(torch.float64), dim=-1)
        return x0, p.gather(-1, x0[:, None])[:, 0]

    def _llada_exact(self, gen_length: int):
        x, B, n = self.x, self.B, self.n
        blocks = gen_length // B
        steps = self.settings.diffusion_steps or gen_length
        if steps % blocks:
            raise ValueError(f"diffusion steps ({steps}) must be a multiple of the number of blocks ({blocks})")
        per_block = steps // blocks
        for b in range(blocks):
            lo, hi = n + b * B, n + (b + 1) * B
            masked = int((x[lo:hi] == self.mask_id).sum())
            base, extra = divmod(masked, per_block)
            schedule = [base + (1 if i < extra else 0) for i in range(per_block)]
            for i in range(per_block):
                if not bool((x[lo:hi] == self.mask_id).any()):
                    break
                mask_index = x == self.mask_id
                mask_index[hi:] = False
                first, last = self._rows(lo, hi)
                proposal, confidence = self._llada_rows(self._guided(x, first, last), x, mask_index,
                                                        first, last)
                chosen = torch.topk(confidence, schedule[i]).indices
                x[chosen] = proposal[chosen]
                yield b, i + 1, lo, min(hi, n + self.cfg.max_new_tokens), len(chosen)

    def _guided(self, x: torch.Tensor, first: int | None, last: int | None) -> torch.Tensor:
        """An exact step's logits; with cfg_scale s, classifier-free guidance as LLaDA's
        generate: the sequence with its prompt masked gives unconditional logits u, and the step
        reads u + (s + 1)(logits - u)."""
        logits = self._forward(x, 0, first=first, last=last)
        if not self.cfg_scale:
            return logits
        unconditional = x.clone()
        unconditional[:self.n] = self.mask_id
        u = self._forward(unconditional, 0, first=first, last=last)
        return u + (self.cfg_scale + 1) * (logits - u)

    # -- Fast-dLLM v1: prefix / dual cache -----------------------------------------------
    def _fast_dllm(self, gen_length: int):
        x, B, n, cfg = self.x, self.B, self.n, self.cfg
        threshold = cfg.threshold
        layers = self.lm.model.config.num_hidden_layers
        for b in range(gen_length // B):
            lo, hi = n + b * B, n + (b + 1) * B
            cache = KVSnapshot(layers)
            first, last = self._rows(lo, lo + 1 if self.dream else hi)
            logits = self._forward(x, 0, cache, first=first, last=last)  # whole sequence, keys/values kept
            step = 1
            if self.dream:  # the block's first token from the full forward, unconditionally
                _, x0 = sample_tokens(logits, cfg.temperature, self._top_p(), self._top_k(),
                                      self.generator)  # sampling: every row, as the reference draws
                x[lo] = x0[lo - (first or 0)]
                committed = 1
            else:
                mask_index = x == self.mask_id
                mask_index[hi:] = False
                proposal, full = self._llada_rows(logits, x, mask_index, first, last)
                committed = self._commit_ranked(x, proposal, full, int(mask_index.sum()), threshold)
            yield b, step, lo, min(hi, n + cfg.max_new_tokens), committed
            cache.mode, cache.lo, cache.hi = self.mode, lo, hi
            end = hi if self.mode == "dual" else x.numel()
            while bool((x[lo:hi] == self.mask_id).any()):
                view = x[lo:end]
                logits = self._forward(view, lo, cache, *self._rows(lo, hi))
                mask_index = view == self.mask_id
                if not self.dream:  # LLaDA proposes for the block only; Dream for the whole view
                    mask_index[B:] = False
                    if self.mode == "prefix" and cfg.temperature > 0:
                        self._llada_choice(logits)  # the reference draws (and drops) one noise more here
                rows = logits.shape[0]  # greedy: the block's rows only (nothing after it can commit)
                committed = self._threshold_commit(view[:rows], logits, mask_index[:rows], B, threshold)
                step += 1
                yield b, step, lo, min(hi, n + cfg.max_new_tokens), committed

    def _threshold_commit(self, x: torch.Tensor, logits: torch.Tensor, mask_index: torch.Tensor,
                          block: int | None, threshold: float) -> int:
        """Fast-dLLM v1's confidence-threshold step on x (a view, written in place): rank the
        masked positions of its first `block` positions (None: mask_index says which) by
        confidence, commit the first and every other one at or above the threshold. Returns how
        many were committed."""
        if self.dream:
            confidence, x0 = sample_tokens(logits[mask_index], self.cfg.temperature, self._top_p(),
                                           self._top_k(), self.generator)
            proposal = torch.full_like(x, self.mask_id)
            proposal[mask_index] = x0
            full = torch.full(x.shape, float("-inf"), dtype=logits.dtype, device=self.device)
            full[mask_index] = confidence
            full[block:] = float("-inf")
            count = int((x[:block] == self.mask_id).sum())
        else:
            proposal, full = self._llada_rows(logits, x, mask_index, 0, logits.shape[0])
            count = int(mask_index.sum())
        return self._commit_ranked(x, proposal, full, count, threshold)

    def _rows(self, lo: int, hi: int) -> tuple[int | None, int | None]:
        """The positions whose logits a forward needs, (first, last): lo..hi-1 when greedy, every
        row when sampling (the references draw noise / samples for every row they compute)."""
        return (None, None) if self.cfg.temperature > 0 else (lo, hi)

    def _llada_rows(self, logits: torch.Tensor, x: torch.Tensor, mask_index: torch.Tensor,
                    first: int | None, last: int | None):
        """LLaDA's proposal and confidence over all of x from the logits of positions
        first..last-1 (None: all): (proposal [L], confidence [L], -inf where not masked)."""
        rows = slice(first, last)
        x0, p = self._llada_choice(logits)
        if self.remasking == "random":  # a uniform confidence over the whole sequence, drawn after the noise
            p = torch.rand(x.shape, device=self.device, generator=self.generator)[rows]
        proposal = x.clone()
        proposal[rows] = x0
        full = torch.full(x.shape, float("-inf"), dtype=p.dtype, device=self.device)
        full[rows] = torch.where(mask_index[rows], p, torch.tensor(float("-inf"), dtype=p.dtype))
        return proposal, full

    def _commit_ranked(self, x: torch.Tensor, proposal: torch.Tensor, full: torch.Tensor, count: int,
                       threshold: float) -> int:
        """Commit the `count` best-ranked positions' first and every other one at or above the
        threshold (Fast-dLLM v1); returns how many."""
        if count == 0:
            return 0
        values, order = torch.topk(full, count)
        keep = torch.cat([torch.ones(1, dtype=torch.bool, device=self.device), values[1:] >= threshold])
        chosen = order[keep]
        x[chosen] = proposal[chosen]
        return int(keep.sum())
