"""Kernel tests run the Triton kernels on the CPU through the Triton interpreter.

TRITON_INTERPRET must be set before any kernel module is imported (triton reads it when a
kernel is decorated); the kernel modules are imported lazily, so setting it here is enough.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


def _rms_rel(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """RMS of the difference relative to the RMS of the expected tensor (float64)."""
    a, e = actual.double(), expected.double()
    return ((a - e).pow(2).mean().sqrt() / e.pow(2).mean().sqrt().clamp_min(1e-30)).item()


@pytest.fixture
def rms_rel():
    """The RMS-relative error function."""
    return _rms_rel


@pytest.fixture
def force_triton(monkeypatch):
    """Make the public functions dispatch to Triton (interpreted on this CPU)."""
    monkeypatch.setenv("CLOVER_FORCE_TRITON", "1")
