"""Choosing between the Triton kernel and the torch reference of an op."""
from __future__ import annotations

import os

import torch

FORCE_ENV = "CLOVER_FORCE_TRITON"


def use_triton(*tensors: torch.Tensor | None) -> bool:
    """True when the Triton kernel should run: any tensor on CUDA, or CLOVER_FORCE_TRITON=1."""
    if os.environ.get(FORCE_ENV, "") == "1":
        return True
    return any(t is not None and t.is_cuda for t in tensors)


def next_pow2(n: int, floor: int = 1) -> int:
    """Smallest power of two >= max(n, floor)."""
    n = max(int(n), floor)
    return 1 << (n - 1).bit_length()
