"""Token healing (engine/healing.py): a raw prompt that ends where the tokenizer would have merged
its last token with what follows is backed up one token, and the first generated token must
continue the removed text. Checked with the bundled tokenizer, which merges a newline with the
next line's indentation, and a scripted model that prefers a token that cannot continue it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import BlockCommitted, GenerationResult
from clover_cli.engine.families import Family
from clover_cli.engine.healing import heal_prompt, token_texts
from clover_cli.engine.loader import LoadedModel, bundled_tiny_dir
from scripted import ScriptedModel

PREFIX = "def f(n):\n    if n:\n        return n\n"


@pytest.fixture(scope="module")
def setup():
    tok = AutoTokenizer.from_pretrained(str(bundled_tiny_dir()))
    ids = list(tok.encode(PREFIX, add_special_tokens=False))
    newline = tok.convert_tokens_to_ids("Ċ")
    indent8 = tok.convert_tokens_to_ids("ĊĠĠĠĠĠĠĠĠ")
    hash_ = tok.convert_tokens_to_ids("#")
    ret = tok.convert_tokens_to_ids("return")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert ids[-1] == newline and indent8 != tok.unk_token_id  # the situation healing is for
    vocab = len(tok)

    def row(choices: dict[int, float]) -> torch.Tensor:
        r = torch.full((vocab,), -20.0)
        for t, logit in choices.items():
            r[t] = logit
        return r

    first = row({hash_: 5.0, indent8: 3.0, newline: 1.0})
    then = [row({ret: 9.0}), row({eos: 9.0})]

    def make(kind: str, healed: bool) -> LoadedModel:
        """kind "diffusion": logits at p are for token p; "ar": logits at p are for token p + 1.
        The first generated token is at len(ids) - 1 when healed, len(ids) when not; it prefers
        '#' over a newline with indentation, then comes "return", then EOS."""
        at = len(ids) - (1 if healed else 0) - (1 if kind == "ar" else 0)
        rows = {at: first, at + 1: then[0], at + 2: then[1]}
        mask = tok.convert_tokens_to_ids("<|mask|>")
        fam = Family("clover", True, "qwen3", mask, 8) if kind == "diffusion" else Family("ar", False, "qwen3")
        return LoadedModel("scripted", ScriptedModel(vocab, rows), tok, fam, eos_token_ids=(eos,))

    return SimpleNamespace(tok=tok, ids=ids, make=make, indent8=indent8, hash_=hash_, ret=ret)


def test_heal_prompt_backs_up_one_token_and_allows_only_continuations(setup):
    s = setup
    lm = SimpleNamespace(tokenizer=s.tok)
    healed = heal_prompt(lm, s.ids)
    assert healed is not None
    assert list(healed.prompt_ids) == s.ids[:-1] and healed.prefix == "\n"
    texts = token_texts(s.tok)
    allowed = {i for i in range(len(texts)) if bool(healed.allowed[i])}
    assert s.indent8 in allowed and s.ids[-1] in allowed and s.hash_ not in allowed
    assert all(texts[i].startswith("\n") for i in allowed)
    # special tokens are never a continuation, even when their text would start right
    assert s.tok.convert_tokens_to_ids("<|im_end|>") not in allowed


def test_nothing_to_heal(setup):
    s = setup
    lm = SimpleNamespace(tokenizer=s.tok)
    assert heal_prompt(lm, s.ids[-1:]) is None  # a one-token prompt
    im_end = s.tok.convert_tokens_to_ids("<|im_end|>")
    assert heal_prompt(lm, s.ids[:-1] + [im_end]) is None  # special last token (a chat prompt)


@pytest.mark.parametrize("kind,block", [("diffusion", None), ("diffusion", 1), ("ar", None)])
def test_healed_completion_continues_the_prompt_text(setup, kind, block):
    """Block diffusion, the same model decoded with block size 1 (bench's AR mode), and the
    autoregressive decoder."""
    s = setup
    plain = Engine(s.make(kind, healed=False)).generate(
        list(s.ids), GenerationConfig(max_new_tokens=8, block_size=block))
    assert plain.token_ids[0] == s.hash_  # the model's own choice breaks the function body
    assert plain.text.startswith("#")

    cfg = GenerationConfig(max_new_tokens=8, block_size=block, token_healing=True)
    events = list(Engine(s.make(kind, healed=True)).stream(list(s.ids), cfg))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert list(result.token_ids[:2]) == [s.indent8, s.ret]
    # the newline the prompt already had is not written again; the text continues the prompt
    assert result.text == "        return"
    assert "".join(e.text for e in events if isinstance(e, BlockCommitted)) == result.text
    assert result.prompt_ids == tuple(s.ids)  # the caller's prompt, not the healed one
    assert result.stats.generated_tokens == 3  # indentation, "return", EOS
