"""Kernel tests run the Triton kernels on the CPU through the Triton interpreter.

TRITON_INTERPRET must be set before triton.language is imported (triton reads it when a function
is decorated): tests/conftest.py sets it, since a library a test module imports at collection may
import triton before this folder is collected.
"""
import pytest
import torch


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
