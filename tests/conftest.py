"""Tiny random checkpoints built once per test session (nothing downloaded)."""
from __future__ import annotations

import os
import sys

import pytest

# Bytecode caches for the suite even where PYTHONDONTWRITEBYTECODE is set: without them every run
# re-does pytest's assertion rewriting of every test file and compiles every module again (~8 s a
# worker at collection). They go to __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False

# Triton kernels run through its interpreter on this CPU. triton reads TRITON_INTERPRET when a
# function is decorated, its own `triton.language` helpers included, and a library a test module
# imports at collection (compressed-tensors) imports triton.language: so it is set here, in the
# conftest every run loads first, not only in tests/kernels/.
os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `-n auto` runs one worker per core: torch's intra-op threads on top of that only contend
    # (set before any test module imports torch; children started by tests inherit it)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from tiny_checkpoints import build_tiny_checkpoint


@pytest.fixture(autouse=True)
def _isolated_user_config(tmp_path_factory, monkeypatch):
    """Keep the developer's ~/.config/clover, state and caches out of every test and every
    `clover` subprocess (user config, trust list, sessions, checkpoints, approvals, repo-map cache)."""
    base = tmp_path_factory.mktemp("xdg")
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"),
                     ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(base / sub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no test downloads a model (engine/hub.py)


TINY_KINDS = {"clover": 12.0, "fast_dllm_v2": 12.0, "sdar": 12.0, "ar": 1.0, "ar_llama": 1.0,
              "hybrid": 12.0}  # kind -> logit_scale


class _TinyCheckpoints(dict):
    """kind -> checkpoint directory, each built the first time a test asks for it (a run of a
    few tests, or one xdist worker, builds only the kinds its tests use)."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, kind: str):
        if kind not in TINY_KINDS:
            raise KeyError(kind)
        self[kind] = build_tiny_checkpoint(self.root / kind, kind, block_size=8 if kind != "sdar" else 4,
                                           logit_scale=TINY_KINDS[kind])
        return self[kind]

    def items(self):
        return [(kind, self[kind]) for kind in TINY_KINDS]


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """kind -> checkpoint directory; logit_scale makes confidences peaked like a trained model."""
    return _TinyCheckpoints(tmp_path_factory.mktemp("tiny"))
