"""Logits steered by construction, for tests whose case (an EOS at one position, a token rewritten
by an edit, a run that only the budget ends, several commits in one forward) must hold whatever a
random tiny model's weights and one CPU's float path would do.

`Steer` wraps a network's `forward` as an instance attribute: `nn.Module.__call__` finds it, so
our decoders and the conformance references, which all call the network with keyword
`input_ids` / `position_ids` (and optionally `logits_to_keep`), see the same edited logits, and
equality of ids with the reference still proves the decode rule (docs/engine.md, "Families").
"""
from __future__ import annotations

from typing import Callable

import torch

BIG = 1e4  # a logit this far above the rest makes its token's probability 1 in float64 and bfloat16


class Steer:
    """with Steer(model, stops=(...), force=...): every logits row loses `stops` (they are never
    chosen) unless `force` says otherwise; `force(p, seq)` -> a token id made certain in the row
    of absolute position p, or None for the model's own row. `seq` maps the forward's absolute
    positions to its input ids (a row sees whether its position is still masked). A dict
    {p: token} is force's shorthand. Rows are by position as the network returns them: for a
    family whose logits are shifted (Dream, Fast-dLLM v2) the row of p - 1 decides position p.
    `unsure` {p: token}: p's row made nearly flat (every logit 0, `token`'s 1: its argmax, with a
    probability near 1/vocabulary), so no threshold commits p while a sure position is left."""

    def __init__(self, model, stops=(), force: dict[int, int] | Callable | None = None,
                 unsure: dict[int, int] | None = None):
        self.model, self.stops, self.unsure = model, sorted(set(stops)), dict(unsure or {})
        table = dict(force or {}) if not callable(force) else None
        self.force = force if table is None else (lambda p, seq: table.get(p))

    def __enter__(self):
        inner = self.model.forward

        def forward(*args, **kwargs):
            out = inner(*args, **kwargs)
            out.logits = self._edit(out.logits, kwargs)
            return out

        self.model.forward = forward
        return self

    def __exit__(self, *exc):
        del self.model.forward

    def _edit(self, logits: torch.Tensor, kwargs) -> torch.Tensor:
        ids, pos = kwargs["input_ids"][0].tolist(), kwargs["position_ids"][0].tolist()
        keep = kwargs.get("logits_to_keep", 0)
        rows = pos[keep] if isinstance(keep, slice) else pos[-keep:] if keep else pos
        assert len(rows) == logits.shape[1], "a logits_to_keep this helper does not know"
        seq = dict(zip(pos, ids))
        logits = logits.clone()
        if self.stops:
            logits[..., self.stops] = -BIG
        for r, p in enumerate(rows):
            if p in self.unsure:
                logits[0, r] = 0.0
                logits[0, r, self.unsure[p]] = 1.0
            token = self.force(p, seq)
            if token is not None:
                logits[0, r, token] = BIG
        return logits


def rewrite_once(at: int, mask_id: int, first: int, then: int, block: int | None = None) -> Callable:
    """A force rule for token editing: position `at` is sure to be `first` while masked, and once
    it holds `first`, sure to be `then` (an edit, the same for the decoder and the reference);
    with `block` (the block length), only when no position of its block is masked (an edit
    after the block is filled)."""
    def force(p: int, seq: dict[int, int]) -> int | None:
        if p != at:
            return None
        if seq[p] == mask_id:
            return first
        if block is not None and seq[p] == first:
            lo = at // block * block
            if any(seq.get(q) == mask_id for q in range(lo, lo + block)):
                return first
        return then

    return force


def stop_ids(lm) -> tuple[int, ...]:
    """Every id the engine or a reference could stop on for this checkpoint."""
    return tuple(sorted(set(lm.eos_token_ids) | set(lm.family.stop_ids or ())))


class Rows(Steer):
    """with Rows(model, rule): a logits row's values set by construction, for every row of the
    batch (LLaDA's guidance runs the sequence and its prompt-masked copy as one batch of two).
    `rule(p, seq)` -> (fill, {token: logit}) for the row of absolute position p, `seq` that batch
    row's {position: input id}; every logit of the row becomes `fill`, then the given tokens
    their values; None leaves the row as the network made it."""

    def __init__(self, model, rule: Callable):
        self.model, self.rule = model, rule

    def _edit(self, logits: torch.Tensor, kwargs) -> torch.Tensor:
        pos = kwargs["position_ids"][0].tolist()
        keep = kwargs.get("logits_to_keep", 0)
        rows = pos[keep] if isinstance(keep, slice) else pos[-keep:] if keep else pos
        assert len(rows) == logits.shape[1], "a logits_to_keep this helper does not know"
        logits = logits.clone()
        for b, ids in enumerate(kwargs["input_ids"].tolist()):
            seq = dict(zip(pos, ids))
            for r, p in enumerate(rows):
                made = self.rule(p, seq)
                if made is not None:
                    logits[b, r] = made[0]
                    for token, value in made[1].items():
                        logits[b, r, token] = value
        return logits


def steer_class(monkeypatch, network: type, editor: Steer) -> None:
    """Make `editor` (a Steer or Rows, its model None) edit the logits of every instance of the
    network class for the rest of the test: the instances a command loads for itself too."""
    inner = network.forward

    def forward(self, *args, **kwargs):
        out = inner(self, *args, **kwargs)
        out.logits = editor._edit(out.logits, kwargs)
        return out

    monkeypatch.setattr(network, "forward", forward)
