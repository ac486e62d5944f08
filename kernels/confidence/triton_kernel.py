"""Triton block confidence: one pass over the vocabulary per row, then a fused commit step.

Pass 1 (grid: rows x vocabulary splits) keeps, per lane, an online max, a rescaled sum of
exponentials and the first index of the max (the online-softmax recurrence of Milakov &
Gimelshein 2018, "Online normalizer calculation for softmax"). Pass 2 (grid: batch) merges the
splits of each row, turns them into (token, confidence = 1 / sum exp(x - max)), and applies the
threshold commit with the top-1 fallback for the whole block row. Greedy decoding only.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._dispatch import next_pow2

NEG_BIG = tl.constexpr(-1.0e30)  # finite "minus infinity": exp(m_old - m_new) never sees inf - inf


@triton.jit
def _row_partials_kernel(x_ptr, m_ptr, s_ptr, i_ptr, L, V, stride_b, stride_l, split_len,
                         mask_id, HAS_MASK: tl.constexpr, NSPLIT: tl.constexpr,
                         BLOCK_V: tl.constexpr):
    row = tl.program_id(0)  # b * L + l
    split = tl.program_id(1)
    b = row // L
    l_ = row % L
    base = x_ptr + b.to(tl.int64) * stride_b + l_.to(tl.int64) * stride_l
    lanes = tl.arange(0, BLOCK_V)
    m_vec = tl.full([BLOCK_V], NEG_BIG, tl.float32)
    s_vec = tl.zeros([BLOCK_V], tl.float32)
    i_vec = tl.zeros([BLOCK_V], tl.int32)
    start = split * split_len
    stop = tl.minimum(start + split_len, V)
    for v0 in range(start, stop, BLOCK_V):
        offs = v0 + lanes
        ok = offs < stop
        x = tl.load(base + offs, mask=ok, other=float("-inf")).to(tl.float32)
        if HAS_MASK:
            x = tl.where(offs == mask_id, float("-inf"), x)
        m_new = tl.maximum(m_vec, x)
        s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
        i_vec = tl.where(x > m_vec, offs, i_vec)
        m_vec = m_new
    m = tl.max(m_vec, 0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), 0)
    idx = tl.min(tl.where(m_vec == m, i_vec, 2147483647), 0)
    out = row * NSPLIT + split
    tl.store(m_ptr + out, m)
    tl.store(s_ptr + out, s)
    tl.store(i_ptr + out, idx)


@triton.jit
def _commit_kernel(m_ptr, s_ptr, i_ptr, masked_ptr, tok_ptr, conf_ptr, commit_ptr, L, threshold,
                   NSPLIT: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_S: tl.constexpr):
    b = tl.program_id(0)
    rows = tl.arange(0, BLOCK_L)
    splits = tl.arange(0, BLOCK_S)
    row_ok = rows < L
    ok = row_ok[:, None] & (splits[None, :] < NSPLIT)
    at = (b * L + rows)[:, None] * NSPLIT + splits[None, :]  # [BLOCK_L, BLOCK_S]
    m = tl.load(m_ptr + at, mask=ok, other=NEG_BIG)
    s = tl.load(s_ptr + at, mask=ok, other=0.0)
    idx = tl.load(i_ptr + at, mask=ok, other=2147483647)
    m_row = tl.max(m, 1)  # [BLOCK_L]
    s_row = tl.sum(s * tl.exp(m - m_row[:, None]), 1)
    tok = tl.min(tl.where(m == m_row[:, None], idx, 2147483647), 1)
    conf = 1.0 / tl.where(row_ok, s_row, 1.0)
    masked = tl.load(masked_ptr + b * L + rows, mask=row_ok, other=0) != 0
    commit = masked & (conf > threshold)
    scores = tl.where(masked, conf, -1.0)
    best = tl.max(scores, 0)
    first = tl.min(tl.where(masked & (scores == best), rows, BLOCK_L), 0)
    none_yet = tl.sum(commit.to(tl.int32), 0) == 0
    commit = commit | (none_yet & (rows == first))
    tl.store(tok_ptr + b * L + rows, tok.to(tl.int64), mask=row_ok)
    tl.store(conf_ptr + b * L + rows, conf, mask=row_ok)
    tl.store(commit_ptr + b * L + rows, commit.to(tl.int8), mask=row_ok)


def _num_splits(rows: int, vocab: int, block_v: int, device: torch.device) -> int:
    """Split the vocabulary so that the grid has a few programs per streaming multiprocessor."""
    if device.type == "cuda":
        target = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 2 * rows  # interpreter: exercise the split merge with little overhead
    splits = max(1, min(-(-target // rows), -(-vocab // (4 * block_v)), 64))
    return splits


def select_commits_triton(logits: torch.Tensor, masked: torch.Tensor, threshold: float,
                          mask_token_id: int | None = None, block_v: int | None = None,
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy select_commits with the two Triton passes. logits: [B, L, V]; masked: bool [B, L]."""
    B, L, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    dev = logits.device
    if block_v is None:
        block_v = 1024 if dev.type == "cuda" else min(256, next_pow2(V, 16))
    nsplit = _num_splits(B * L, V, block_v, dev)
    split_len = -(-V // nsplit)
    split_len = -(-split_len // block_v) * block_v
    nsplit = -(-V // split_len)
    part_m = torch.empty(B * L * nsplit, dtype=torch.float32, device=dev)
    part_s = torch.empty_like(part_m)
    part_i = torch.empty(B * L * nsplit, dtype=torch.int32, device=dev)
    _row_partials_kernel[(B * L, nsplit)](
        logits, part_m, part_s, part_i, L, V, logits.stride(0), logits.stride(1), split_len,
        -1 if mask_token_id is None else int(mask_token_id), HAS_MASK=mask_token_id is not None,
        NSPLIT=nsplit, BLOCK_V=block_v)
    tokens = torch.empty(B, L, dtype=torch.long, device=dev)
    conf = torch.empty(B, L, dtype=torch.float32, device=dev)
    commit = torch.empty(B, L, dtype=torch.int8, device=dev)
    masked8 = masked.to(device=dev, dtype=torch.int8).contiguous()
    _commit_kernel[(B,)](part_m, part_s, part_i, masked8, tokens, conf, commit, L, float(threshold),
                         NSPLIT=nsplit, BLOCK_L=next_pow2(L, 2), BLOCK_S=next_pow2(nsplit, 2))
    return tokens, conf, commit.bool()
