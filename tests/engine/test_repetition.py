"""Repetition control's stop (engine/processors.py): a repeated n-gram ends the output wherever
block edges fall; text that does not loop, or only EOS padding, is left alone. The end-to-end
cases on a scripted repeating model are in test_eos_and_limits.py."""
from __future__ import annotations

from clover_cli.engine.processors import REPEAT_SPAN, repeating_tail, repetition_ending

EOS = (0,)


def test_a_short_ngram_repeated_through_the_span_is_caught():
    of_the_file = [11, 12, 13]  # "of the file" in three tokens
    ids = list(range(100, 120)) + of_the_file * 17  # 51 = REPEAT_SPAN + 3 periodic ids
    assert repeating_tail(ids, EOS) == 3
    assert repeating_tail(ids[:-1], EOS) == 0  # one id short of the span


def test_blocks_that_differ_still_repeat_an_ngram():
    ids = [11, 12, 13] * 20
    units = [tuple(ids[i:i + 32]) for i in range(0, 60, 32)]
    assert units[0] != units[1] and repetition_ending(ids, units, EOS)


def test_long_periods_need_three_repetitions():
    period = list(range(200, 230))  # 30 ids
    assert repeating_tail(period * 2 + period[:REPEAT_SPAN - 30], EOS) == 0
    assert repeating_tail([1] + period * 4, EOS) == 30


def test_text_that_does_not_loop_and_eos_padding_are_left_alone():
    assert repeating_tail(list(range(300)), EOS) == 0
    assert repeating_tail(list(range(20)) + [0] * 80, EOS) == 0
    assert not repetition_ending(list(range(64)), [tuple(range(32)), tuple(range(32, 64))], EOS)
