"""docs/engine.md, exactness test 3 (EOS rule) and the budget, stop, cancel and streaming rules.

A scripted model (logits chosen per absolute position) makes the EOS situations exact.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.events import BlockCommitted, DenoiseStep, GenerationResult
from clover_cli.engine.families import Family
from clover_cli.engine.loader import LoadedModel
from clover_cli.engine.runtime import TextStreamer
from clover_cli.engine.settings import ARSettings, BlockSettings
from scripted import ScriptedModel


def _row(vocab: int, token: int, prob: float) -> torch.Tensor:
    row = torch.full((vocab,), (1 - prob) / (vocab - 1)).log()
    row[token] = torch.tensor(prob).log()
    return row


@pytest.fixture()
def scripted(tiny_dirs):
    tok = AutoTokenizer.from_pretrained(str(tiny_dirs["clover"]))
    vocab = len(tok)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    mask = tok.convert_tokens_to_ids("<|mask|>")
    a = tok.convert_tokens_to_ids("a")

    def make(rows: dict[int, torch.Tensor], block: int = 8) -> LoadedModel:
        model = ScriptedModel(vocab, rows)
        fam = Family("clover", True, "qwen3", mask, block)
        return LoadedModel("scripted", model, tok, fam, eos_token_ids=(eos,))

    return SimpleNamespace(make=make, vocab=vocab, eos=eos, a=a, tok=tok)


def test_eos_committed_early_waits_for_earlier_positions(scripted):
    s = scripted
    prompt = [s.a] * 5  # positions 0-4; the first decode block is 0-7, generated positions 5, 6, 7
    rows = {5: _row(s.vocab, s.a, 0.6), 6: _row(s.vocab, s.a, 0.5), 7: _row(s.vocab, s.eos, 0.99)}
    lm = s.make(rows)
    events = list(Engine(lm).stream(prompt, GenerationConfig(max_new_tokens=50)))
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    result = events[-1]
    # step 1 commits the EOS at 7 while 5 and 6 are masked: decoding must go on
    assert steps[0].masked == (True, True, False)
    assert len(steps) == 3
    assert result.finish_reason == "eos"
    assert list(result.token_ids) == [s.a, s.a, s.eos]
    assert result.text == "aa"


def test_output_is_cut_after_the_first_eos(scripted):
    s = scripted
    prompt = [s.a] * 8  # aligned: block 8-15 is all generated
    rows = {8: _row(s.vocab, s.a, 0.99), 9: _row(s.vocab, s.eos, 0.99), 10: _row(s.vocab, s.a, 0.99),
            11: _row(s.vocab, s.eos, 0.99)}
    result = Engine(s.make(rows)).generate(prompt, GenerationConfig(max_new_tokens=50))
    assert list(result.token_ids) == [s.a, s.eos]
    assert result.finish_reason == "eos" and result.stats.steps_per_block == (1,)


def test_max_new_tokens_cuts_the_output(scripted):
    s = scripted
    rows = {p: _row(s.vocab, s.a, 0.99) for p in range(64)}
    lm = s.make(rows)
    result = Engine(lm).generate([s.a] * 3, GenerationConfig(max_new_tokens=10))
    assert len(result.token_ids) == 10 and result.finish_reason == "length"
    assert result.stats.blocks == 2  # positions 3-7, then 8-12


def test_stop_string_cuts_text(scripted):
    s = scripted
    b = s.tok.convert_tokens_to_ids("b")
    rows = {p: _row(s.vocab, s.a if p % 4 else b, 0.99) for p in range(64)}
    result = Engine(s.make(rows)).generate([s.a] * 3, GenerationConfig(max_new_tokens=40, stop=("ba",)))
    assert result.finish_reason == "stop"
    assert result.text == "a"  # a b a a a b ...: cut before the first "ba"


def test_cancel_between_steps(scripted):
    s = scripted
    rows = {p: _row(s.vocab, s.a, 0.3) for p in range(200)}  # one commit per step
    cancel = threading.Event()
    seen = 0
    result = None
    for ev in Engine(s.make(rows)).stream([s.a] * 3, GenerationConfig(max_new_tokens=100), cancel):
        if isinstance(ev, DenoiseStep):
            seen += 1
            if seen == 3:
                cancel.set()
        result = ev
    assert isinstance(result, GenerationResult)
    assert result.finish_reason == "cancelled" and seen == 3


def test_block_text_deltas_rebuild_the_text(scripted, tiny_dirs):
    s = scripted
    ids = s.tok.encode("héllo wörld — ünïcode ✓ 日本語", add_special_tokens=False)
    streamer = TextStreamer(s.tok, {s.eos})
    out = ""
    for k in range(1, len(ids) + 1):  # one token per block: multi-byte characters get split
        delta = streamer.delta(ids[:k])
        assert "\ufffd" not in delta
        out += delta
    assert out == "héllo wörld — ünïcode ✓ 日本語"


def test_repetition_control_stops_repeated_blocks(scripted):
    s = scripted
    rows = {p: _row(s.vocab, s.a, 0.99) for p in range(300)}
    plain = Engine(s.make(rows)).generate([s.a] * 8, GenerationConfig(max_new_tokens=64))
    assert plain.finish_reason == "length"
    ctl = Engine(s.make(rows)).generate([s.a] * 8, GenerationConfig(max_new_tokens=64, repetition_penalty=1.3))
    assert ctl.finish_reason == "repetition" and len(ctl.token_ids) == 16


def test_progressive_ending_prefers_eos_near_the_budget(scripted):
    s = scripted
    rows = {p: torch.zeros(s.vocab) for p in range(300)}
    for p in rows:
        rows[p][s.a] = 4.0
        rows[p][s.eos] = 0.0
    plain = Engine(s.make(rows)).generate([s.a] * 8, GenerationConfig(max_new_tokens=32))
    assert plain.finish_reason == "length"
    ended = Engine(s.make(rows)).generate([s.a] * 8, GenerationConfig(
        max_new_tokens=32, family=BlockSettings(progressive_ending=True)))
    assert ended.finish_reason == "eos" and 24 < len(ended.token_ids) <= 32


def _eos_case(s):
    """EOS committed at 10 while 8 and 9 are masked; 11-15 are more confident than 8 and 9."""
    rows = {8: _row(s.vocab, s.a, 0.5), 9: _row(s.vocab, s.a, 0.4), 10: _row(s.vocab, s.eos, 0.99)}
    rows.update({p: _row(s.vocab, s.a, 0.9) for p in range(11, 16)})
    return s.make(rows)


def test_positions_after_a_committed_eos_are_decoded_by_default(scripted):
    """The references keep selecting over the whole block after an EOS is committed (a step may
    spend its commit on a position the output will cut): that is the exact default."""
    s = scripted
    events = list(Engine(_eos_case(s)).stream([s.a] * 8, GenerationConfig(max_new_tokens=50)))
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    result = events[-1]
    # EOS; then 11..15 (0.9 each, the fallback takes the first); then 8, then 9
    assert [st.committed_now for st in steps] == [1] * 8
    assert steps[5].masked == (True, True, False, False, False, False, False, False)
    assert list(result.token_ids) == [s.a, s.a, s.eos] and result.finish_reason == "eos"
    assert result.stats.forwards == 8


def test_eos_confine_option_never_decodes_positions_after_the_eos(scripted):
    """GenerationConfig.eos_confine (off by default; it can change tokens before the EOS)."""
    s = scripted
    cfg = GenerationConfig(max_new_tokens=50, family=BlockSettings(eos_confine=True))
    events = list(Engine(_eos_case(s)).stream([s.a] * 8, cfg))
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    result = events[-1]
    assert [st.committed_now for st in steps] == [1, 1, 1]  # EOS, then 8, then 9
    assert steps[1].masked[:3] == (False, True, False)
    assert steps[-1].masked[3:] == (True,) * 5  # never decoded, and reported as masked
    assert list(result.token_ids) == [s.a, s.a, s.eos] and result.finish_reason == "eos"
    assert result.stats.forwards == 3


def test_a_budget_ending_mid_block_decodes_the_whole_block(scripted):
    """max_new_tokens=2 ends at position 9, but 10-15 are decoded too (first, being more
    confident), as the references decode the whole last block; the output is cut at 2."""
    s = scripted
    rows = {8: _row(s.vocab, s.a, 0.4), 9: _row(s.vocab, s.a, 0.3)}
    rows.update({p: _row(s.vocab, s.a, 0.9) for p in range(10, 16)})
    events = list(Engine(s.make(rows)).stream([s.a] * 8, GenerationConfig(max_new_tokens=2)))
    steps = [e for e in events if isinstance(e, DenoiseStep)]
    result = events[-1]
    assert len(steps) == 8 and all(st.masked == (True, True) for st in steps[:6])
    assert list(result.token_ids) == [s.a, s.a] and result.finish_reason == "length"


HOUR = 3600.0


class _SlowPrefill(ScriptedModel):
    """A scripted model whose prefill forwards (more than one block of input) take an hour on the
    clock the engine reads: `time.perf_counter`, which the test moves on by HOUR inside each
    (no sleep). Real time still passes, so the work around the forwards is measured as it is."""

    skipped = 0.0

    def forward(self, input_ids, *args, **kwargs):
        if input_ids.shape[1] > 8:
            _SlowPrefill.skipped += HOUR
        return super().forward(input_ids, *args, **kwargs)


def test_prefill_time_is_reported_apart_from_decoding(scripted, monkeypatch):
    """stats.prefill_seconds is the wall time of the whole prompt prefill — its forwards and the
    ids and masks built for them — which `clover bench` leaves out of decode speed and overhead;
    a prompt inside one block has none. Structural, not a wall-clock bound: the two prefill
    forwards take an hour each, so decoding's share (total - prefill) would hold at least an
    hour if it took in either of them, and prefill is above them by the real time of the rest."""
    import time

    from clover_cli.engine.block_decode import BlockDecoder

    real = time.perf_counter
    monkeypatch.setattr(_SlowPrefill, "skipped", 0.0)
    monkeypatch.setattr(time, "perf_counter", lambda: real() + _SlowPrefill.skipped)
    s = scripted
    rows = {p: _row(s.vocab, s.a, 0.99) for p in range(2100)}
    lm = s.make(rows)
    lm.model = _SlowPrefill(s.vocab, rows)
    dec = BlockDecoder(lm, [s.a] * 2060, GenerationConfig(max_new_tokens=4))  # 3 prefill chunks
    result = list(dec.run())[-1]
    forwards_only = dec.run_forward.uncounted_seconds
    assert _SlowPrefill.skipped == 2 * HOUR  # two prefill forwards of 1,024 tokens, then one of 8
    assert 2 * HOUR <= forwards_only < 3 * HOUR
    assert result.stats.prefill_seconds > forwards_only  # the chunks' masks count as prefill
    assert result.stats.total_seconds - result.stats.prefill_seconds < HOUR
    assert dec.run_forward.seconds < HOUR  # the decoding forwards took in no prefill forward
    short = Engine(lm).generate([s.a] * 5, GenerationConfig(max_new_tokens=3))
    assert short.stats.prefill_seconds == 0.0


def _ar(s, rows):
    """The scripted model as an autoregressive checkpoint (one token per forward)."""
    lm = s.make(rows)
    return LoadedModel("scripted-ar", lm.model, lm.tokenizer, Family("ar", False, "qwen3"),
                       eos_token_ids=lm.eos_token_ids)


@pytest.mark.parametrize("kind", ["ar", "block"])
def test_a_stop_string_cuts_the_ids_with_the_text(scripted, kind):
    """After a stop string, the ids are cut where the text is (the AR decoder once kept them)."""
    s = scripted
    b = s.tok.convert_tokens_to_ids("b")
    rows = {p: _row(s.vocab, s.a if p % 4 else b, 0.99) for p in range(64)}
    lm = _ar(s, rows) if kind == "ar" else s.make(rows)
    result = Engine(lm).generate([s.a] * 3, GenerationConfig(max_new_tokens=40, stop=("ba",)))
    assert result.finish_reason == "stop"
    assert s.tok.decode(list(result.token_ids)) == result.text == ("aa" if kind == "ar" else "a")
    assert list(result.token_ids) == [s.a] * len(result.text)


def _period_three(s) -> dict[int, torch.Tensor]:
    """Rows that make the model say "abc" over and over: a period of 3, so no two blocks of 8
    are alike and only an n-gram check across block edges sees the loop."""
    abc = [s.tok.convert_tokens_to_ids(t) for t in "abc"]
    return {p: _row(s.vocab, abc[p % 3], 0.99) for p in range(400)}


@pytest.mark.parametrize("kind", ["ar", "block"])
def test_repetition_control_stops_a_repeated_ngram_across_block_edges(scripted, kind):
    s = scripted
    rows = _period_three(s)
    make = (lambda: _ar(s, rows)) if kind == "ar" else (lambda: s.make(rows))
    plain = Engine(make()).generate([s.a] * 8, GenerationConfig(max_new_tokens=128))
    assert plain.finish_reason == "length" and len(plain.token_ids) == 128
    ctl = Engine(make()).generate([s.a] * 8, GenerationConfig(max_new_tokens=128, repetition_penalty=1.3))
    assert ctl.finish_reason == "repetition"
    # REPEAT_SPAN (48) ids equal to the 3 before them: 51 tokens; blocks of 8 end at the 56th
    assert len(ctl.token_ids) == (51 if kind == "ar" else 56)
    assert ctl.token_ids == plain.token_ids[:len(ctl.token_ids)]


def test_progressive_ending_reaches_the_autoregressive_decode(scripted):
    """AR's own settings (ARSettings) carry progressive ending too: the agent turns it on for
    every model, and an AR checkpoint then ends near the budget as a block one does."""
    s = scripted
    rows = {p: torch.zeros(s.vocab) for p in range(300)}
    for p in rows:
        rows[p][s.a] = 4.0
    lm = s.make(rows)
    ar = LoadedModel("scripted-ar", lm.model, s.tok, Family("ar", False, "qwen3"), eos_token_ids=(s.eos,))
    plain = Engine(ar).generate([s.a] * 8, GenerationConfig(max_new_tokens=32))
    assert plain.finish_reason == "length"
    ended = Engine(ar).generate([s.a] * 8, GenerationConfig(max_new_tokens=32,
                                                            family=ARSettings(progressive_ending=True)))
    assert ended.finish_reason == "eos" and 24 < len(ended.token_ids) <= 32


@pytest.mark.parametrize("kind", ["ar", "block", "diffusion"])
def test_an_empty_prompt_is_refused_in_one_line(scripted, kind):
    """Every decoder opens a request the same way (decode_loop.open_request): an empty prompt is
    a ValueError that names the decoding, before any forward."""
    from clover_cli.engine.ar_decode import ARDecoder
    from clover_cli.engine.block_decode import BlockDecoder
    from clover_cli.engine.fullattn_decode import FullAttnDecoder

    s = scripted
    lm = s.make({})
    if kind == "ar":
        lm, decoder = _ar(s, {}), ARDecoder
    elif kind == "diffusion":
        lm = LoadedModel("scripted-llada", lm.model, s.tok, Family("llada", True, "llada", lm.mask_token_id, 8),
                         eos_token_ids=(s.eos,))
        decoder = FullAttnDecoder
    else:
        decoder = BlockDecoder
    with pytest.raises(ValueError, match=r"^empty prompt: \w+ decoding needs at least one prompt token$"):
        decoder(lm, [], GenerationConfig(max_new_tokens=8))
    assert lm.model.calls == 0
