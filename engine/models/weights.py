"""Reading a checkpoint's safetensors into our own networks (engine/models/*.py): the tensors a
network expects, by name, with one-line errors for what is missing or misshaped."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import torch


def read_weights(directory: Path, expected: dict[str, tuple[int, ...]],
                 optional: Callable[[str], bool] = lambda key: False,
                 transform: Callable[[str, torch.Tensor], dict[str, torch.Tensor]] | None = None,
                 reader: Callable[[], Iterator[tuple[str, tuple, Callable]]] | None = None,
                 ) -> dict[str, torch.Tensor]:
    """The tensors named in `expected` (name -> shape) from every *.safetensors file in
    `directory`; others are skipped. ValueError (one line) when one that is not `optional` is
    missing, or one has another shape than the config gives. transform: applied to each tensor
    as it is read (engine/quantize.py quantizes there), its dict kept instead. reader: yields
    (name, shape, get) instead of the plain safetensors (engine/prequantized.py); a get() that
    returns a dict gives tensors already in their loaded form."""
    state: dict[str, torch.Tensor] = {}
    found: set[str] = set()
    for key, shape, get in (reader or (lambda: _plain(directory)))():
        if key not in expected:
            continue
        if tuple(shape) != expected[key]:
            raise ValueError(f"shape mismatch (e.g. {key}: {tuple(shape)} in the checkpoint, "
                             f"{expected[key]} from config.json)")
        found.add(key)
        value = get()
        if isinstance(value, dict):
            state.update(value)
        else:
            state.update(transform(key, value) if transform else {key: value})
    missing = sorted(k for k in set(expected) - found if not optional(k))
    if missing:
        raise ValueError(f"missing weights ({len(missing)}, e.g. {missing[0]})")
    return state


def _plain(directory: Path) -> Iterator[tuple[str, tuple, Callable]]:
    from safetensors import safe_open

    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():
                yield key, tuple(fh.get_slice(key).get_shape()), lambda fh=fh, key=key: fh.get_tensor(key)
