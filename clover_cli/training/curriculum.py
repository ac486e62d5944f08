"""Copy-curriculum chat examples: pure copy and key-value recall with synthetic names.

Small transformers learn copying through induction heads, which need dedicated, dense data
(Olsson et al. 2022, "In-context Learning and Induction Heads"). The texts of the requests live
in curriculum.json (data, not code)."""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

from clover_cli.training import names
from clover_cli.training.data import Example

DATA = Path(__file__).with_name("curriculum.json")


@lru_cache(maxsize=1)
def phrases() -> dict:
    """The phrasing templates of curriculum.json."""
    return json.loads(DATA.read_text(encoding="utf-8"))


def _thing(rng: random.Random, real: names.RealNames | None = None) -> str:
    if real and rng.random() < real.share:
        return real.thing(rng)
    r = rng.random()
    if r < 0.5:
        return names.identifier(rng)
    if r < 0.8:
        return names.module_path(rng)
    return names.dir_path(rng)


def copy_chat(rng: random.Random, tokenizer, real: names.RealNames | None = None) -> str:
    """User asks to repeat a name/path; the assistant repeats it exactly."""
    x = _thing(rng, real)
    user = rng.choice(phrases()["copy"]).replace("{X}", x)
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user}, {"role": "assistant", "content": x}], tokenize=False)


def kv_chat(rng: random.Random, tokenizer, real: names.RealNames | None = None) -> str:
    """Key-value recall: a short table (synthetic keys; values synthetic or, with `real`, real
    names), the assistant recalls one."""
    k = rng.randint(2, 6)
    keys = list(dict.fromkeys(names.identifier(rng, "snake") for _ in range(k)))
    vals = [_thing(rng, real) for _ in keys]
    sep = rng.choice((" = ", ": ", " -> "))
    table = "\n".join(f"{a}{sep}{b}" for a, b in zip(keys, vals))
    i = rng.randrange(len(keys))
    q = rng.choice(phrases()["kv"]).replace("{K}", keys[i])
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{table}\n{q}"}, {"role": "assistant", "content": vals[i]}],
        tokenize=False)


def curriculum_chat(rng: random.Random, tokenizer, real: names.RealNames | None = None) -> str:
    """One copy or key-value example (things drawn from `real` names half the time if given)."""
    return copy_chat(rng, tokenizer, real) if rng.random() < 0.5 else kv_chat(rng, tokenizer, real)


class DenseCopySource:
    """Dense copy signal: most scored tokens of a row can only be predicted by copying.

    The chat curriculum scores ~10 answer tokens per 160-token row, so a step carried ~100 copy
    targets and copying never formed (measured: curriculum-only from scratch, loss flat at 3.5
    after 550 steps). Here a row packs plain-text episodes of two kinds, each scored only where
    the answer is determined by the context (the "repeated random sequence" data that induction
    heads form on; Olsson et al. 2022):

    * repeat: a list of synthetic names/paths, a marker line, the same list again (scored);
    * recall: a table `key = value` of synthetic names, then queries `key ->` each followed by
      its value (scored) — locating an item by its context before copying it, the shape of
      "where is NAME defined?" -> {"name": "NAME"}.
    """

    def __init__(self, tokenizer, n: int = 256, real: names.RealNames | None = None):
        self.tok = tokenizer
        self.n = n
        self.real = real
        self.eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        self.pad = tokenizer.convert_tokens_to_ids("<|pad|>")

    def _ids(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def _repeat(self, rng: random.Random) -> tuple[list[int], list[bool]]:
        items = [_thing(rng, self.real) for _ in range(rng.randint(2, 6))]
        sep = rng.choice((" ", ", ", "\n"))
        body = sep.join(items)
        head = self._ids(body + "\n" + rng.choice(("again:", "copy:", "repeat:", ">>")) + " ")
        tail = self._ids(body + "\n")
        return head + tail, [False] * len(head) + [True] * len(tail)

    def _recall(self, rng: random.Random) -> tuple[list[int], list[bool]]:
        keys = list(dict.fromkeys(names.identifier(rng, "snake") for _ in range(rng.randint(2, 6))))
        vals = [_thing(rng, self.real) for _ in keys]
        sep = rng.choice((" = ", ": "))
        ids = self._ids("\n".join(f"{k}{sep}{v}" for k, v in zip(keys, vals)) + "\n")
        ok = [False] * len(ids)
        for i in rng.sample(range(len(keys)), k=len(keys)):
            q = self._ids(f"{keys[i]} ->")
            a = self._ids(f" {vals[i]}\n")
            ids += q + a
            ok += [False] * len(q) + [True] * len(a)
        return ids, ok

    def row(self, rng: random.Random, n: int) -> Example:
        """Pack whole episodes until the next one would not fit (episodes longer than a row are
        skipped, as the chat packer does); pad the rest."""
        ids: list[int] = []
        ok: list[bool] = []
        for _ in range(50):
            e_ids, e_ok = (self._repeat if rng.random() < 0.5 else self._recall)(rng)
            if len(e_ids) + 1 > n:
                continue
            if len(ids) + len(e_ids) + 1 > n:
                break
            ids += e_ids + [self.eot]
            ok += e_ok + [False]
        if not ids:
            raise ValueError(f"no copy episode fits a row of {n} tokens (50 tried): raise "
                             "--seq-len")
        pad = n - len(ids)
        return Example(ids + [self.pad] * pad, ok + [False] * pad)
