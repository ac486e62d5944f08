"""The one decode loop every decoder runs under (docs/engine.md, "The decode loop").

A decoder says how a unit (a token, a block, a canvas, a run of committed positions) opens, is
stepped and is committed: it is a generator that yields a `DenoiseStep` per step and a `Unit`
when a unit's ids are final, and that does the unit's commit (a cache write, an encoder pass)
when it is resumed after the `Unit`. The loop owns the rest, alike for every family: the cancel
check before the decoder is resumed (so before every step's forward), the EOS ending and the cut
after the first EOS, stop strings, repetition control, the `BlockCommitted` events, the stats
and the `GenerationResult`. When the loop ends the generation it closes the decoder's generator,
so a commit that is not needed is never run.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Generator, Iterator

import torch

from .config import GenerationConfig
from .events import BlockCommitted, DenoiseStep, GenerationResult, GenerationStats
from .families import settled
from .processors import repetition_ending
from .runtime import ForwardRunner, TextStreamer, find_stop


@dataclass(frozen=True)
class Unit:
    """A unit's final generated ids. eos: an EOS among them ends the generation (the output is
    cut after the first EOS of all generated ids)."""

    ids: tuple[int, ...]
    eos: bool = False


@dataclass
class PrefillInfo:
    """What a decoder reports about the prompt for the stats (filled while it runs)."""

    seconds: float = 0.0  # wall time of the prompt prefill (no token comes of it)
    reused: int = 0  # prompt positions taken from an earlier request's cache
    prefilled: int = 0  # prompt positions run through prefill forwards


def open_request(lm, prompt_ids: list[int], cfg: GenerationConfig, what: str) -> tuple[list[int], GenerationConfig]:
    """(prompt, cfg) as a decoder keeps them: the prompt as a new list and the request with the
    family's own settings (engine/settings.py). ValueError for an empty prompt, naming `what`
    (the kind of decoding) that needs one token at least."""
    if not prompt_ids:
        raise ValueError(f"empty prompt: {what} needs at least one prompt token")
    return list(prompt_ids), settled(lm, cfg)


def seeded_generator(device, cfg: GenerationConfig, needed: bool | None = None) -> torch.Generator | None:
    """A torch.Generator seeded with cfg.seed (else the clock), or None when nothing is drawn.
    needed: whether this decode draws random numbers (default: when it samples)."""
    if not (cfg.temperature > 0 if needed is None else needed):
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(cfg.seed if cfg.seed is not None else int(time.time_ns() % 2**63))
    return generator


def cut_at_stop(streamer: TextStreamer, ids: list[int], stops: tuple[str, ...]) -> tuple[list[int], str, bool]:
    """(ids, text, hit): the text cut before the earliest stop string, and the ids cut to the
    fewest whose text still reaches the cut (the stop string's own tokens are dropped)."""
    text = streamer.text_of(ids)
    cut = find_stop(text, stops) if stops else -1
    if cut < 0:
        return ids, text, False
    ids = list(ids)
    while ids and len(streamer.text_of(ids[:-1])) >= cut:
        ids.pop()
    return ids, text[:cut], True


def cut_at_first_eos(ids: list[int], eos: tuple[int, ...]) -> list[int]:
    """ids up to and including the first EOS (all of them when none)."""
    for i, tok in enumerate(ids):
        if tok in eos:
            return ids[:i + 1]
    return ids


class DecodeLoop:
    """One generation's loop; `run(units)` yields the events, the GenerationResult last."""

    def __init__(self, *, prompt: list[int], cfg: GenerationConfig, eos: tuple[int, ...],
                 streamer: TextStreamer, runner: ForwardRunner, cancel: threading.Event | None,
                 prefill: PrefillInfo | None = None):
        self.t0 = time.perf_counter()
        self.prompt, self.cfg, self.eos = prompt, cfg, eos
        self.streamer, self.runner, self.cancel = streamer, runner, cancel
        self.prefill = prefill or PrefillInfo()
        self.generated: list[int] = []
        self.units: list[tuple[int, ...]] = []
        self.steps: list[int] = []  # denoise steps per block, in the order the steps came
        self._block: int | None = None
        self.first_block_seconds = 0.0

    def run(self, units: Generator) -> Iterator:
        finish = "length"
        try:
            while True:
                if self.cancel is not None and self.cancel.is_set():
                    finish = "cancelled"
                    break
                try:
                    event = next(units)
                except StopIteration:
                    break
                if isinstance(event, DenoiseStep):
                    self._count(event)
                    yield event
                    continue
                yield self._committed(event)
                ending = "eos" if event.eos else self._ending()
                if ending:
                    finish = ending
                    break
        finally:  # also when the consumer stops early: the decoder's own cleanup runs
            units.close()
        yield self._result(finish)

    def _count(self, step: DenoiseStep) -> None:
        if self._block != step.block_index or not self.steps:
            self._block = step.block_index
            self.steps.append(0)
        self.steps[-1] += 1

    def _committed(self, unit: Unit) -> BlockCommitted:
        self.generated.extend(unit.ids)
        self.units.append(tuple(unit.ids))
        if unit.eos:  # an earlier unit may hold an EOS that did not end it (Fast-dLLM v2)
            self.generated = cut_at_first_eos(self.generated, self.eos)
        if not self.first_block_seconds:
            self.first_block_seconds = time.perf_counter() - self.t0
        return BlockCommitted(len(self.units) - 1, tuple(unit.ids), self.streamer.delta(self.generated))

    def _ending(self) -> str | None:
        """Why decoding ends after this unit (a stop string, a repetition), or None."""
        cfg = self.cfg
        if cfg.stop and find_stop(self.streamer.text_of(self.generated), cfg.stop) >= 0:
            return "stop"
        if cfg.repetition_penalty > 1.0 and repetition_ending(self.generated, self.units, self.eos):
            return "repetition"
        return None

    def _result(self, finish: str) -> GenerationResult:
        ids, text, hit = cut_at_stop(self.streamer, self.generated, self.cfg.stop)
        stats = GenerationStats(
            generated_tokens=len(ids), forwards=self.runner.forwards, blocks=len(self.steps),
            steps_per_block=tuple(self.steps), forward_seconds=self.runner.seconds,
            total_seconds=time.perf_counter() - self.t0, prompt_tokens=len(self.prompt),
            prefill_seconds=self.prefill.seconds, reused_tokens=self.prefill.reused,
            prefilled_tokens=self.prefill.prefilled, first_block_seconds=self.first_block_seconds)
        return GenerationResult(tuple(ids), text, "stop" if hit else finish, stats, tuple(self.prompt))
