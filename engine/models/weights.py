"""Reading a checkpoint's safetensors into our own networks (engine/models/*.py): the tensors a
network expects, by name, with one-line errors for what is missing or misshaped."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch


def read_weights(directory: Path, expected: dict[str, tuple[int, ...]],
                 optional: Callable[[str], bool] = lambda key: False) -> dict[str, torch.Tensor]:
    """The tensors named in `expected` (name -> shape) from every *.safetensors file in
    `directory`; others are skipped. ValueError (one line) when one that is not `optional` is
    missing, or one has another shape than the config gives."""
    from safetensors import safe_open

    state: dict[str, torch.Tensor] = {}
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():
                if key in expected:
                    state[key] = fh.get_tensor(key)
    missing = sorted(k for k in set(expected) - set(state) if not optional(k))
    if missing:
        raise ValueError(f"missing weights ({len(missing)}, e.g. {missing[0]})")
    bad = sorted(k for k, t in state.items() if tuple(t.shape) != expected[k])
    if bad:
        raise ValueError(f"shape mismatch ({len(bad)}, e.g. {bad[0]}: {tuple(state[bad[0]].shape)} "
                         f"in the checkpoint, {expected[bad[0]]} from config.json)")
    return state
