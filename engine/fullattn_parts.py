"""The pieces of full-attention diffusion decoding (engine/fullattn_decode.py; docs/engine.md,
"Full-attention diffusion"): the modes and their labels, the Fast-dLLM v1 key/value snapshot,
the checkpoint's generation defaults and Dream's token choice (Dream-org/Dream
`generation_utils.py` `sample_tokens`, read to learn, not copied)."""
from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from .families import FAMILIES, with_modes
from .settings import MODES

DEFAULT_MODE = "dual"  # measured faster than prefix on the tiny model (docs/engine.md)
MODE_LABELS = {"exact": "exact (reference)", "prefix": "prefix cache (approx)",
               "dual": "dual cache (approx)"}
DREAM_ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")
FULL_ATTENTION = with_modes()  # Dream, LLaDA 1.x (the family table, engine/families.py)


def resolve_mode(family_name: str, mode: str | None) -> str | None:
    """The diffusion mode a family decodes in (None: it has no such modes); ValueError with one
    line for a mode given to a family it does not apply to, or an unknown one."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown diffusion mode {mode!r} (choose from {', '.join(MODES)})")
    if family_name not in FULL_ATTENTION:
        if mode is not None:
            names = " and ".join(FAMILIES[name].short for name in FULL_ATTENTION)
            raise ValueError(f"--diffusion-mode applies to {names} checkpoints only; this "
                             f"model is {family_name!r}")
        return None
    return mode or DEFAULT_MODE


def mode_label(family_name: str, mode: str | None) -> str:
    """What the status line shows for the mode ("" for families without modes)."""
    resolved = resolve_mode(family_name, mode) if family_name in FULL_ATTENTION else None
    return MODE_LABELS[resolved] if resolved else ""


class KVSnapshot:
    """The keys/values of one whole-sequence forward (post-rotary, per layer), served to later
    forwards as Fast-dLLM v1 does: `prefix` returns the first `lo` positions followed by the new
    ones; `dual` returns every position with [lo, hi) replaced by the new ones (in place, as the
    reference writes its cache: every step replaces the whole block)."""

    def __init__(self, layers: int):
        self.k: list = [None] * layers
        self.v: list = [None] * layers
        self.mode = "record"
        self.lo = self.hi = 0

    def update(self, k: torch.Tensor, v: torch.Tensor, layer: int):
        if self.mode == "record":
            self.k[layer], self.v[layer] = k, v
            return k, v
        if self.mode == "prefix":
            return (torch.cat([self.k[layer][..., :self.lo, :], k], dim=-2),
                    torch.cat([self.v[layer][..., :self.lo, :], v], dim=-2))
        self.k[layer][..., self.lo:self.hi, :] = k
        self.v[layer][..., self.lo:self.hi, :] = v
        return self.k[layer], self.v[layer]

    def get_seq_length(self, layer: int = 0) -> int:
        return 0


def generation_defaults(lm) -> dict:
    """The checkpoint's generation_config.json (Dream: alg, steps, eps, alg_temp, top_k); {}
    when there is none or it is unreadable."""
    path = lm.path / "generation_config.json" if lm.path is not None else None
    try:
        data = json.loads(path.read_text()) if path is not None and path.is_file() else {}
    except (OSError, json.JSONDecodeError):
        data = {}
    return data if isinstance(data, dict) else {}


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float | None, top_k: int | None,
                  generator: torch.Generator | None, *, margin: bool = False, entropy: bool = False):
    """Dream's token choice over rows [R, V] -> (confidence [R], tokens [R]): temperature, top-p
    and top-k shape the distribution; greedy takes its max, sampling draws from it; confidence
    is the chosen token's probability, or top1 - top2 (margin), or minus the entropy."""
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        ordered, order = torch.sort(logits, descending=True)
        cum = torch.cumsum(F.softmax(ordered, dim=-1), dim=-1)
        drop = cum > top_p
        drop[..., 1:] = drop[..., :-1].clone()
        drop[..., 0] = False
        drop = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, order, drop)
        logits = logits.masked_fill(drop, torch.finfo(logits.dtype).min)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]))[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)
    probs = torch.softmax(logits, dim=-1)
    if temperature > 0 and probs.shape[0]:
        tokens = torch.multinomial(probs, 1, replacement=True, generator=generator)[:, 0]
        confidence = probs.gather(-1, tokens[:, None])[:, 0]
    else:
        confidence, tokens = probs.max(dim=-1)
    if margin:
        top = torch.sort(probs, dim=-1, descending=True)[0]
        confidence = top[:, 0] - top[:, 1]
    if entropy:
        confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
    return confidence, tokens
