"""Training rows for the block-diffusion trainer: a weighted mixture of sources.

Each source yields examples (ids, loss_ok); rows of `seq_len` tokens are cut (code) or packed
(chat examples separated by <|endoftext|>) and padded with <|pad|>. loss_ok marks the positions
that may be masked and scored: all code tokens, the assistant turns of chat examples."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from clover_cli.training import corpus

# the training layouts of a batch: block diffusion and autoregressive; these
# are the trainer's words, not checkpoint families (engine/families.py)
BD_LAYOUT, AR_LAYOUT = "bd", "ar"
LAYOUTS = (BD_LAYOUT, AR_LAYOUT)

ASSISTANT_HEADER = "<|im_start|>assistant\n"
END = "<|im_end|>"


@dataclass
class Example:
    ids: list[int]
    loss_ok: list[bool]


def chat_example(tokenizer, text: str) -> Example:
    """Tokenize a rendered chat; loss_ok on the assistant turns (content + <|im_end|>)."""
    spans = []
    pos = 0
    while True:
        a = text.find(ASSISTANT_HEADER, pos)
        if a < 0:
            break
        s = a + len(ASSISTANT_HEADER)
        e = text.find(END, s)
        e = len(text) if e < 0 else e + len(END)
        spans.append((s, e))
        pos = e
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ok = [any(s <= st < e for s, e in spans) for st, _ in enc["offset_mapping"]]
    return Example(list(enc["input_ids"]), ok)


class CodeSource:
    """Random windows of Python source (train or eval split of the files on this machine)."""

    def __init__(self, tokenizer, split: str = "train", roots: list[Path] | None = None,
                 files: list[Path] | None = None, n: int = 256):
        self.tok = tokenizer
        self.n = n
        self.files = files if files is not None else list(corpus.python_files(roots, split=split))
        if not self.files:
            raise ValueError("no Python source files found for the code corpus")
        self.eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    def row(self, rng: random.Random, n: int) -> Example:
        """One row of exactly n tokens from one or more random files."""
        ids: list[int] = []
        first = True
        while len(ids) < n:
            text = corpus.read_source(rng.choice(self.files))
            if not text:
                continue
            toks = self.tok(text, add_special_tokens=False)["input_ids"] + [self.eot]
            if first and len(toks) > n:
                start = rng.randrange(0, len(toks) - n + 1)
                toks = toks[start:]
            first = False
            ids += toks
        ids = ids[:n]
        return Example(ids, [True] * n)


class PackedChatSource:
    """Packs chat examples from `make(rng)` into rows; examples longer than a row are skipped.
    `make` returns a rendered chat, or an Example when `encode` is False (already tokenized)."""

    def __init__(self, tokenizer, make: Callable[[random.Random], "str | Example"], n: int = 128,
                 encode: bool = True):
        self.tok = tokenizer
        self.n = n
        self.make = make
        self.encode = encode
        self.eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        self.pad = tokenizer.convert_tokens_to_ids("<|pad|>")

    def row(self, rng: random.Random, n: int) -> Example:
        """Pack whole examples until the next one would not fit; pad the rest."""
        ids: list[int] = []
        ok: list[bool] = []
        for _ in range(200):
            made = self.make(rng)
            ex = chat_example(self.tok, made) if self.encode else made
            if len(ex.ids) + 1 > n:
                continue
            if len(ids) + len(ex.ids) + 1 > n:
                break
            ids += ex.ids + [self.eot]
            ok += ex.loss_ok + [False]
        if not ids:
            raise ValueError(f"no chat example fits a row of {n} tokens (200 tried): raise the "
                             "row length for this source")
        pad = n - len(ids)
        return Example(ids + [self.pad] * pad, ok + [False] * pad)


class Mixture:
    """Weighted mixture of sources; each micro-batch comes from one source, in rows of that
    source's length `n` (about `tokens` tokens per micro-batch)."""

    def __init__(self, sources: dict[str, object], weights: dict[str, float], pad_id: int):
        self.sources = {k: v for k, v in sources.items() if weights.get(k, 0) > 0}
        if not self.sources:
            raise ValueError("the data mixture is empty (all weights are 0)")
        self.names = list(self.sources)
        self.weights = [weights[k] for k in self.names]
        self.pad_id = pad_id
        self.last: str | None = None  # the source of the last batch

    def allows_ar(self) -> bool:
        """May the last batch be trained in the AR layout? (a source says so in `layouts`)"""
        return AR_LAYOUT in getattr(self.sources.get(self.last), "layouts", LAYOUTS)

    def batch(self, rng: random.Random, tokens: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids [B, N] long, loss_ok [B, N] bool, pad [B, N] bool."""
        self.last = rng.choices(self.names, self.weights)[0]
        src = self.sources[self.last]
        rows = [src.row(rng, src.n) for _ in range(max(1, tokens // src.n))]
        ids = torch.tensor([r.ids for r in rows], dtype=torch.long)
        ok = torch.tensor([r.loss_ok for r in rows], dtype=torch.bool)
        pad = ids == self.pad_id
        return ids, ok & ~pad, pad


def fixed_batches(source, n_rows: int, n: int, seed: int, bsz: int = 8) -> Iterator[Example]:
    """Deterministic rows for held-out evaluation."""
    rng = random.Random(seed)
    for _ in range(n_rows):
        yield source.row(rng, n)
