"""LLaDA2.1's decode with token editing (docs/engine.md, "Token editing (LLaDA2.1)").

LLaDA2.1 (inclusionAI, "LLaDA2.1: Speeding Up Text Diffusion via Token Editing", 2026) keeps
LLaDA2.0's network and adds token-to-token editing to its mask-to-token decode. Learned from its
released `generate` (the checkpoint's modeling_llada2_moe.py, as mirrored in the public dllm
repository's pipelines/llada21); written here, not copied. Each step of a block runs the block and
takes every position's greedy token and its probability (softmax over all logits):
- mask to token: every masked position above `threshold` commits, else the most confident one
  (the plain rule; the reference's `num_to_transfer` is 1);
- token to token: every position that was already committed when the step began, outside the
  prompt, whose greedy token differs from its token with probability above `editing_threshold`,
  is rewritten;
- once no mask is left, up to `max_post_steps` more steps may only edit; the block is final after
  the first step that starts with no mask and edits nothing, or when that budget is spent.
Nothing before the current block ever changes, so a finished block is written to the cache as
in engine/block_decode.py (fused with the next block's first step), and prefix reuse
(engine/prefix_cache.py) works unchanged: the cache holds the final tokens. Unlike LLaDA2.0 a
committed EOS can still be edited away, so a block always runs to its end; generation stops
after a final block that holds an EOS inside the budget (the reference's output, cut after its
first EOS, is the same with or without its `eos_early_stop`).
"""
from __future__ import annotations

import re

import torch

from .block_decode import BlockDecoder
from .events import DenoiseStep
from .settings import EditSettings

# how a LLaDA2.1 release is named: its config.json is LLaDA2.0's (model_type llada2_moe, the same
# network and keys), so the checkpoint is told apart by its name or path (an hf: download sits
# under models--inclusionAI--LLaDA2.1-mini/...)
LLADA21_NAME = re.compile(r"llada[-_]?2[._]1(?![0-9])", re.IGNORECASE)


def is_llada21(lm) -> bool:
    """True for a llada2_moe checkpoint whose name or directory names a LLaDA2.1 release."""
    if lm.family.row.editor is None:  # a family with no editing decode (engine/families.py)
        return False
    return any(LLADA21_NAME.search(str(s)) for s in (lm.name, lm.path) if s)


def editing_wanted(lm, cfg) -> bool:
    """Whether this request decodes with token editing: its settings' `editing` (EditSettings,
    engine/settings.py), or by default the checkpoint's own (LLaDA2.1). `cfg` is settled (its
    `family` is the family's class); a family with no editing decode never edits (asking it to is
    refused when the settings are settled). ValueError (one line) for settings editing does not take."""
    settings = cfg.family
    if not isinstance(settings, EditSettings):
        return False
    on = is_llada21(lm) if settings.editing is None else settings.editing
    if not on:
        return False
    if cfg.temperature > 0:
        raise ValueError("token editing (LLaDA2.1) decodes greedily here; use temperature 0 or --no-edit")
    if settings.eos_confine or settings.sub_block_size:
        raise ValueError("--eos-confine and --sub-block do not apply to token editing (LLaDA2.1)")
    return True


class EditDecoder(BlockDecoder):
    """One generation with LLaDA2.1's token editing; iterate `run()` for events. Everything is
    BlockDecoder's but the commit policy of a block's steps (`_denoise_block`)."""

    def _predict(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """logits [B, V] -> (greedy token [B], its probability under the softmax of all logits
        [B]); the mask token is never a prediction (its logit stays in the softmax)."""
        x = logits if logits.dtype == torch.float64 else logits.float()
        probs = torch.softmax(x, dim=-1)  # [B, V]
        x = x.clone()
        x[:, self.mask_id] = float("-inf")
        tokens = x.argmax(dim=-1)  # [B]
        return tokens, probs.gather(1, tokens[:, None])[:, 0]

    def _denoise_block(self, block, masked, step, pending):
        """Token editing as the block's commit policy: each step commits masked positions as the
        plain rule does and rewrites committed ones (yields a DenoiseStep); then up to
        max_post_steps editing-only steps. Returns (final block, eos_at: the block index of its
        first EOS within the output, or -1: a committed EOS can still be edited away, so the
        block always runs to its end)."""
        cfg, fixed, end = self.cfg, step.fixed, step.end
        editable_area = torch.ones_like(masked)
        editable_area[:fixed] = False  # the prompt tail is never edited
        post = steps = 0
        while True:
            filling = bool(masked.any())
            if not filling:
                post += 1
                if post > self.settings.max_post_steps:
                    break
            logits = self._step_logits(block, masked, step, pending, heal=True)
            pending = None
            tokens, conf = self._predict(logits)
            commit = torch.zeros_like(masked)
            if filling:
                commit = masked & (conf > cfg.threshold)
                if not bool(commit.any()):
                    best = torch.where(masked, conf, torch.full_like(conf, float("-inf")))
                    commit[int(best.argmax())] = True
            edit = ~masked & editable_area & (tokens != block) & (conf > self.settings.editing_threshold)
            block = torch.where(commit | edit, tokens, block)
            masked = masked & ~commit
            steps += 1
            yield DenoiseStep(step.block_index, steps, tuple(block[fixed:end].tolist()),
                              tuple(masked[fixed:end].tolist()), int(commit.sum()), int(edit.sum()))
            if not filling and not bool(edit.any()):
                break
        out = block[fixed:end].tolist()
        eos_at = next((i for i, t in enumerate(out) if t in self.eos), -1)
        return block, fixed + eos_at if eos_at >= 0 else -1
