"""Names built from the tokenizer's own word tokens: every vocabulary word gets copy practice
(the fourth model copied a token only if the real-name pool held it often)."""
from __future__ import annotations

import json
import random
import re

from clover_cli.training import curriculum, names, transcripts


def test_vocab_words_are_the_alphabetic_tokens(tok):
    words = names.vocab_words(tok)
    vocab = tok.get_vocab()
    assert len(words) > 1000 and all(w in vocab and re.fullmatch(r"[A-Za-z]{2,}", w) for w in words)
    assert not set(words) & set(tok.all_special_tokens)
    # every alphabetic token is there, not a sample
    assert len(words) == sum(1 for t in vocab if re.fullmatch(r"[A-Za-z]{2,}", t))


def _words_in(piece: str, words) -> int:
    """How many words make up `piece` when it is a concatenation of them (0: it is not)."""
    best = {0: 0}
    for i in range(1, len(piece) + 1):
        for w in words:
            j = i - len(w)
            if j in best and piece[j:i] in (w, w.lower()):
                best[i] = max(best.get(i, 0), best[j] + 1)
    return best.get(len(piece), 0)


def test_vocab_thing_builds_each_kind_from_the_words():
    words = ("ptr", "pending", "gfm", "Header")
    rng = random.Random(0)
    seen_styles, compounds, joins = set(), 0, 0
    for _ in range(300):
        n = names.vocab_thing(rng, words, "name")
        snake = n.lstrip("_").split("_")
        if re.fullmatch(r"(Ptr|Pending|Gfm|Header)+", n) and not n.startswith("Header"):
            seen_styles.add("camel")
        elif all(_words_in(p, words) for p in snake):
            seen_styles.add("private" if n.startswith("_") else "snake" if len(snake) > 1 else "one")
            total = sum(_words_in(p, words) for p in snake)
            joins += total - 1
            compounds += total - len(snake)  # words joined with no `_` between them
        else:
            assert re.fullmatch(r"(Ptr|Pending|Gfm|Header)+", n), n
            seen_styles.add("camel")
        f = names.vocab_thing(rng, words, "file")
        assert f.endswith(".py") and all(_words_in(p, words) for p in re.split(r"[/_]", f[:-3])), f
        d = names.vocab_thing(rng, words, "dir")
        assert 1 <= len(d.split("/")) <= 2 and all(_words_in(p, words) for p in d.split("/")), d
    assert seen_styles == {"camel", "private", "snake", "one"}
    assert 0.2 < compounds / joins < 0.5  # about a third of the joins are compounds (`shelf`)


def test_pool_draws_vocab_names_at_the_word_share():
    words = tuple(f"w{chr(97 + i)}{chr(97 + j)}" for i in range(26) for j in range(26))
    real = names.RealNames(("restock_shelf",), ("shop/inventory.py",), ("shop",),
                           share=1.0, words=words, word_share=0.5)
    rng = random.Random(0)
    got = [real.thing(rng) for _ in range(2000)]
    n_real = sum(g in ("restock_shelf", "shop/inventory.py", "shop") for g in got)
    assert 850 < n_real < 1150
    used = {p for g in got for p in re.split(r"[/_.]", g) if p in words}
    assert len(used) > 0.75 * len(words)  # uniform over the vocabulary, not a few favourites
    assert real.thing(random.Random(0), "file").endswith(".py")
    assert all(names.RealNames(("a_b",), (), (), words=words, word_share=0.0).thing(rng, "name")
               == "a_b" for _ in range(50))


def test_copy_and_call_data_carry_vocab_names(tok):
    words = names.vocab_words(tok)
    pool = names.RealNames((), (), (), share=1.0, words=words, word_share=1.0)
    rng = random.Random(0)

    def scored_ids(src) -> set[int]:
        out: set[int] = set()
        for _ in range(30):
            ex = src.row(rng, 256)
            out |= {i for i, ok in zip(ex.ids, ex.loss_ok) if ok}
        return out

    synthetic = scored_ids(curriculum.DenseCopySource(tok, 256))
    vocab = scored_ids(curriculum.DenseCopySource(tok, 256, pool))
    # the synthetic alphabet reaches a few hundred tokens; vocabulary names reach far more
    assert len(vocab) > 2 * len(synthetic) and len(vocab) > 600
    call = transcripts.synthetic_call_chat(random.Random(3), tok, real=pool)
    user = call.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    args = json.loads(call.split("<tool_call>")[1].split("</tool_call>")[0])["arguments"]
    thing = list(args.values())[0].replace("(def|class) ", "")  # the name or path asked about
    assert thing in user  # (the request may be wrapped in a greeting or sign-off)
    assert any(p in words for p in re.split(r"[^A-Za-z]+", thing) if p)
