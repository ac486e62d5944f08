"""Copy-curriculum chat examples: pure copy and key-value recall with synthetic names.

Small transformers learn copying through induction heads, which need dedicated, dense data
(Olsson et al. 2022, "In-context Learning and Induction Heads"). The texts of the requests live
in curriculum.json (data, not code)."""
from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

from clover_cli.engine.training import names

DATA = Path(__file__).with_name("curriculum.json")


@lru_cache(maxsize=1)
def phrases() -> dict:
    """The phrasing templates of curriculum.json."""
    return json.loads(DATA.read_text(encoding="utf-8"))


def _thing(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return names.identifier(rng)
    if r < 0.8:
        return names.module_path(rng)
    return names.dir_path(rng)


def copy_chat(rng: random.Random, tokenizer) -> str:
    """User asks to repeat a synthetic name/path; the assistant repeats it exactly."""
    x = _thing(rng)
    user = rng.choice(phrases()["copy"]).replace("{X}", x)
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user}, {"role": "assistant", "content": x}], tokenize=False)


def kv_chat(rng: random.Random, tokenizer) -> str:
    """Key-value recall: a short table of synthetic keys/values, the assistant recalls one."""
    k = rng.randint(2, 6)
    keys = list(dict.fromkeys(names.identifier(rng, "snake") for _ in range(k)))
    vals = [_thing(rng) for _ in keys]
    sep = rng.choice((" = ", ": ", " -> "))
    table = "\n".join(f"{a}{sep}{b}" for a, b in zip(keys, vals))
    i = rng.randrange(len(keys))
    q = rng.choice(phrases()["kv"]).replace("{K}", keys[i])
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{table}\n{q}"}, {"role": "assistant", "content": vals[i]}],
        tokenize=False)


def curriculum_chat(rng: random.Random, tokenizer) -> str:
    """One copy or key-value example."""
    return copy_chat(rng, tokenizer) if rng.random() < 0.5 else kv_chat(rng, tokenizer)
