"""The commit rule of one denoise step (docs/engine.md), for one block.

The rule itself lives in `clover_cli.kernels.confidence` as an op with a torch reference (CPU)
and a fused Triton kernel (CUDA); this adapts it to the decoder's unbatched [L, V] rows.
"""
from __future__ import annotations

import numpy as np
import torch

from clover_cli.kernels.confidence import select_commits


def softmax_dtype(confidence_dtype: str, model_dtype: torch.dtype) -> torch.dtype | None:
    """The `softmax_dtype` for `select` of a family row's `confidence_dtype` on a model of
    `model_dtype`: "logits" gives a half-precision model's own dtype (the logits' dtype before
    ForwardRunner's exact upcast); "float64" float64; else None (float32, float64 for a float64
    model, where a "logits" family's softmax already runs in its logits' dtype)."""
    if confidence_dtype == "float64":
        return torch.float64
    if confidence_dtype == "logits" and model_dtype in (torch.bfloat16, torch.float16):
        return model_dtype
    return None


def select(logits: torch.Tensor, masked: torch.Tensor, threshold: float, temperature: float = 0.0,
           mask_token_id: int | None = None, generator: torch.Generator | None = None,
           top_p: float = 1.0, mask_in_softmax: bool = False, softmax_dtype: torch.dtype | None = None):
    """logits: [L, V]; masked: bool [L] -> (tokens [L], confidence [L], commit bool [L]).

    Confidence is the max softmax probability with the mask token excluded (the sampled token's
    probability when sampling); commit = masked & (confidence > threshold), else the single most
    confident masked position. mask_in_softmax (greedy only): the softmax runs over every logit,
    the mask token's included, as SDAR's and Fast-dLLM v2's reference generate do; the mask is
    still never the prediction. softmax_dtype (greedy): the dtype that softmax runs
    in, the token then being the argmax of those probabilities (the first of a tie), as
    Fast-dLLM v2's greedy branch takes it; None: float32 (float64 for float64 logits) and the
    argmax of the logits. The family row's `confidence_dtype` picks it (engine/families.py).
    """
    rows = torch.nonzero(masked).flatten()  # only masked rows matter: skip the softmax of the rest
    if (mask_in_softmax or softmax_dtype is not None) and temperature <= 0 and mask_token_id is not None \
            and rows.numel():
        return _greedy_full_softmax(logits, masked, rows, threshold, mask_token_id, softmax_dtype,
                                    keep_mask=mask_in_softmax)
    if temperature <= 0 and rows.numel() and logits.device.type == "cpu":  # numpy needs CPU memory
        return _greedy_rows(logits, masked, rows, threshold, mask_token_id)
    if rows.numel() == masked.numel() or rows.numel() == 0:
        tokens, confidence, commit = select_commits(
            logits[None], masked[None], threshold, temperature=temperature,
            mask_token_id=mask_token_id, generator=generator, top_p=top_p)
        return tokens[0], confidence[0], commit[0]
    sub_tokens, sub_conf, sub_commit = select_commits(
        logits[rows][None], masked[rows][None], threshold, temperature=temperature,
        mask_token_id=mask_token_id, generator=generator, top_p=top_p)
    tokens = torch.zeros(masked.shape, dtype=torch.long, device=logits.device)
    confidence = torch.zeros(masked.shape, dtype=torch.float32, device=logits.device)
    commit = torch.zeros_like(masked)
    tokens[rows], confidence[rows], commit[rows] = sub_tokens[0], sub_conf[0], sub_commit[0]
    return tokens, confidence, commit


def _greedy_rows(logits: torch.Tensor, masked: torch.Tensor, rows: torch.Tensor, threshold: float,
                 mask_token_id: int | None):
    """Greedy selection on CPU with few tensor ops (the same rule as select_commits_reference).

    On a small model each op's cost is a visible share of a few-ms step (engine overhead,
    `clover bench`), and this torch build's CPU ops differ a lot in cost: measured on the 2-core
    machine, one thread, a [32, 4096] float32 block: `max(dim)` 129 us, `argmax` 312 us, but
    `amax` 13 us and numpy's `argmax` 11 us; `exp` 92 us but a whole `softmax` 61 us. So the
    indices come from numpy, the confidence is the row max of `softmax` (the reference's own
    values), and the 32-element bookkeeping runs in numpy too."""
    x = logits.index_select(0, rows).float()  # [R, V], a copy we may overwrite
    if mask_token_id is not None:
        x[:, mask_token_id] = float("-inf")
    tok = x.numpy().argmax(axis=-1)  # [R] int64 (numpy takes the first index of a tie)
    conf = torch.softmax(x, dim=-1).amax(dim=-1).numpy()  # [R] max probability
    hit = conf > threshold
    if not hit.any():
        hit[int(conf.argmax())] = True  # first most confident masked position
    n = masked.shape[0]
    if rows.numel() == n:  # every position masked (each block's first step): nothing to scatter
        return torch.from_numpy(tok), torch.from_numpy(conf), torch.from_numpy(hit)
    where = rows.numpy()
    tokens = np.zeros(n, dtype=np.int64)
    confidence = np.zeros(n, dtype=np.float32)
    commit = np.zeros(n, dtype=np.bool_)
    tokens[where], confidence[where], commit[where] = tok, conf, hit
    return torch.from_numpy(tokens), torch.from_numpy(confidence), torch.from_numpy(commit)


def _greedy_full_softmax(logits: torch.Tensor, masked: torch.Tensor, rows: torch.Tensor,
                         threshold: float, mask_token_id: int, dtype: torch.dtype | None = None,
                         keep_mask: bool = True):
    """Greedy selection whose confidence is the probability under the softmax of all logits
    (float32, or float64 for a float64 model: the references' own precision there; a float32
    softmax over 157K logits moves a 0.94999905 across a 0.95 threshold), or in `dtype` when
    given, the token then the argmax of those probabilities; keep_mask False: the mask token's
    logit is dropped before the softmax."""
    x = logits.index_select(0, rows)
    x = x.to(dtype or (torch.float64 if x.dtype == torch.float64 else torch.float32))  # [R, V]
    if not keep_mask:
        x[:, mask_token_id] = float("-inf")
    probs = torch.softmax(x, dim=-1)
    ranked = probs.clone() if dtype is not None else x
    ranked[:, mask_token_id] = float("-inf")
    tok = ranked.argmax(dim=-1)  # [R] (the first index of a tie, as torch's argmax)
    conf = probs.gather(1, tok[:, None])[:, 0]
    hit = conf > threshold
    if not bool(hit.any()):
        hit[int(conf.argmax())] = True  # first most confident masked position
    n = masked.shape[0]
    tokens = torch.zeros(n, dtype=torch.long, device=logits.device)
    confidence = torch.zeros(n, dtype=conf.dtype, device=logits.device)
    commit = torch.zeros_like(masked)
    tokens[rows], confidence[rows], commit[rows] = tok, conf, hit
    return tokens, confidence, commit
