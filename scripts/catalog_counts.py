"""Recompute the parameter counts engine/catalog.py gives as "config" figures (docs/engine.md,
"Checkpoints users run"): the dense formulas, and the mixture-of-experts networks built from their
configs on torch's meta device (no weights, no download). Prints `repo computed catalog ok`.

    .venv/bin/python scripts/catalog_counts.py
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from clover_cli.engine.catalog import CATALOG, dense_params

ROOT = Path(__file__).resolve().parents[1]


def _elements(model: torch.nn.Module) -> int:
    return sum(t.numel() for t in model.state_dict().values())


def meta_counts() -> dict[str, int]:
    """repo -> element count of the network built on the meta device."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    from transformers.models.qwen3_5_moe import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration

    from clover_cli.engine.models.llada2 import LLaDA2MoE

    raw = json.loads((ROOT / "tests/engine/conformance/configs/llada2_mini.reconstructed.json").read_text())
    with torch.device("meta"):
        llada2 = _elements(LLaDA2MoE(raw))
        counts = {"inclusionAI/LLaDA2.0-mini": llada2, "inclusionAI/LLaDA2.1-mini": llada2,
                  "Qwen/Qwen3-Next-80B-A3B-Instruct": _elements(Qwen3NextForCausalLM(Qwen3NextConfig())),
                  "Qwen/Qwen3.5-35B-A3B": _elements(Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig()))}
    return counts


def main() -> int:
    meta = meta_counts()
    bad = 0
    for c in CATALOG:
        if c.params_from != "config":
            continue
        computed = meta.get(c.repo) or dense_params(c.config)
        ok = computed == c.params
        bad += not ok
        print(f"{c.repo} {computed} {c.params} {'ok' if ok else 'DIFFERS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
