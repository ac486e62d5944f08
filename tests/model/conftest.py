"""Fixtures for the model/trainer tests: the bundled tokenizer and tiny models built here."""
from __future__ import annotations

from pathlib import Path

import pytest

from clover_cli.engine.loader import bundled_tiny_dir

BUNDLED = bundled_tiny_dir()


@pytest.fixture(scope="session")
def bundled_dir() -> Path:
    if not (BUNDLED / "config.json").exists():
        pytest.fail(f"bundled model missing at {BUNDLED}")
    return BUNDLED


@pytest.fixture(scope="session")
def tok(bundled_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(bundled_dir))


@pytest.fixture()
def micro_model(tok):
    import torch

    from clover_cli.training import modeling

    torch.manual_seed(0)
    return modeling.build_model(modeling.new_config(tok, "micro"))


@pytest.fixture()
def train_configs(monkeypatch):
    """`clover train`'s TrainConfig objects, captured: the Trainer is replaced by a stub that
    records its config and stops with a ValueError (exit 1, "stopped by the test")."""
    from clover_cli.training import trainer as trainer_mod

    seen: list = []

    class Stop:
        def __init__(self, cfg, echo=None):
            seen.append(cfg)
            raise ValueError("stopped by the test")

    monkeypatch.setattr(trainer_mod, "Trainer", Stop)
    return seen
