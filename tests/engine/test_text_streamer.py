"""The text streamer (engine/runtime.py, docs/engine.md "Events and stats"): block deltas that
rebuild the decoded text exactly, for byte-level and SentencePiece-style tokenizers, with
characters split between blocks held back, hidden ids skipped, a healed prefix removed; and
incremental, so a block's text costs its own tokens, not the whole answer again."""
from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from clover_cli.engine.loader import bundled_tiny_dir
from clover_cli.engine.runtime import TextStreamer
from clover_cli.engine.tokenizer import CheckpointTokenizer

TEXTS = ["héllo wörld — ünïcode ✓ 日本語 🙂 def f(x):\n    return x  # done",
         "  leading spaces\tand\ttabs\n\n\nfoo_bar.baz(1, 2)  ",
         "emoji 🧪🧪 and CJK 漢字かな, then ascii"]


class _Counting:
    """A tokenizer whose whole-list decodes are recorded (the streamer's fallback path)."""

    def __init__(self, inner, stream_capable: bool = True):
        self.inner = inner
        self.lengths: list[int] = []
        self.clean_up_tokenization_spaces = not stream_capable
        if stream_capable:
            self.backend_tokenizer = inner.backend_tokenizer

    def decode(self, ids, skip_special_tokens=False):
        self.lengths.append(len(ids))
        return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)


def _bundled():
    return CheckpointTokenizer.from_dir(bundled_tiny_dir())


class _SentencePieceLike:
    """Llama-style: Metaspace pre-tokenizer, byte fallback, a decoder that strips the leading
    space — the case where a piece decoded alone differs from the same piece mid-text."""

    def __init__(self):
        vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
        for b in range(256):
            vocab[f"<0x{b:02X}>"] = len(vocab)
        for piece in ["▁", "▁h", "▁he", "llo", "▁w", "ö", "r", "ld", "▁def", "▁f", "(x", "):",
                      "▁return", "▁x", "▁#", "▁done", "▁▁", "▁▁▁▁", "e", "l", "o", "d", "a", "n",
                      "s", "t", "i", "g", "p", "c", "▁and", "▁then", "▁ascii", ",", "."]:
            vocab.setdefault(piece, len(vocab))
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        self.backend_tokenizer = tok
        self.clean_up_tokenization_spaces = False

    def encode(self, text, add_special_tokens=False):
        return self.backend_tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids, skip_special_tokens=False):
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)


TOKENIZERS = {"bundled byte-level BPE": _bundled, "sentencepiece-like": _SentencePieceLike}


def _stream(streamer: TextStreamer, ids: list[int], rng: random.Random) -> list[str]:
    """Feed ids in random-sized blocks (1..9 tokens, so multi-byte characters get split)."""
    deltas, k = [], 0
    while k < len(ids):
        k = min(len(ids), k + rng.randint(1, 9))
        deltas.append(streamer.delta(ids[:k]))
    return deltas


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
@pytest.mark.parametrize("seed", range(3))
def test_deltas_rebuild_the_decoded_text(name, seed):
    tok = TOKENIZERS[name]()
    rng = random.Random(seed)
    for text in TEXTS:
        ids = list(tok.encode(text, add_special_tokens=False))
        streamer = TextStreamer(tok, set())
        assert streamer._stream is not None  # the incremental path is the one under test
        deltas = _stream(streamer, ids, rng)
        assert all("\ufffd" not in d for d in deltas)
        assert "".join(deltas) == tok.decode(ids, skip_special_tokens=False)


def test_hidden_ids_and_a_healed_prefix_are_left_out():
    tok = _bundled()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    ids = list(tok.encode("    return value  # ünï", add_special_tokens=False))
    with_eos = ids[:3] + [eos] + ids[3:] + [eos]
    full = tok.decode(ids, skip_special_tokens=False)
    skip = full[:2]  # the healed prompt's removed text (engine/healing.py)
    streamer = TextStreamer(tok, {eos}, skip=skip)
    out = "".join(_stream(streamer, with_eos, random.Random(5)))
    assert out == full[2:] == streamer.text_of(with_eos)


def test_a_block_costs_its_own_tokens_not_the_whole_answer():
    """With a tokenizers backend the streamer never decodes the answer so far; a tokenizer
    whose decode rewrites text afterwards falls back to whole decodes, which grow."""
    tok = _bundled()
    ids = list(tok.encode(TEXTS[0] * 40, add_special_tokens=False))
    counting = _Counting(tok)
    streamer = TextStreamer(counting, set())
    for k in range(32, len(ids) + 32, 32):
        streamer.delta(ids[:k])
    assert counting.lengths == []  # no whole-list decode at any block
    assert streamer.emitted == tok.decode(ids, skip_special_tokens=False)

    fallback = _Counting(tok, stream_capable=False)
    streamer = TextStreamer(fallback, set())
    for k in range(32, len(ids) + 32, 32):
        streamer.delta(ids[:k])
    assert fallback.lengths[-1] == len(ids) and streamer.emitted == tok.decode(ids)


def test_ids_that_stop_extending_the_stream_fall_back_to_whole_decodes():
    tok = _bundled()
    a = list(tok.encode("first answer text", add_special_tokens=False))
    b = list(tok.encode("other answer, longer text", add_special_tokens=False))
    streamer = TextStreamer(tok, set())
    out = streamer.delta(a)
    assert out == tok.decode(a)
    changed = b[:len(a) + 2]  # same length and more, but different ids
    out += streamer.delta(changed)
    assert streamer._stream is None
    assert streamer.emitted == tok.decode(changed)
