"""The dense copy source: every scored token is determined by the context before it."""
from __future__ import annotations

import random

from clover_cli.training.curriculum import DenseCopySource


def _scored_runs(ids, ok):
    """Maximal runs of scored positions: (start, end)."""
    runs, i = [], 0
    while i < len(ids):
        if ok[i]:
            j = i
            while j < len(ids) and ok[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _occurs(seq, sub):
    return any(seq[k:k + len(sub)] == sub for k in range(len(seq) - len(sub) + 1))


def test_rows_have_the_right_length_and_a_dense_signal(tok):
    src = DenseCopySource(tok, 256)
    rng = random.Random(0)
    dens = []
    for _ in range(20):
        ex = src.row(rng, 256)
        assert len(ex.ids) == len(ex.loss_ok) == 256
        dens.append(sum(ex.loss_ok) / 256)
    # the chat curriculum scores ~6% of a row; this source must be several times denser
    assert sum(dens) / len(dens) > 0.2


def test_every_scored_answer_is_a_copy_of_earlier_context(tok):
    src = DenseCopySource(tok, 256)
    rng = random.Random(1)
    checked = 0
    for _ in range(20):
        ex = src.row(rng, 256)
        eot = tok.convert_tokens_to_ids("<|endoftext|>")
        for s, e in _scored_runs(ex.ids, ex.loss_ok):
            episode_start = max((k + 1 for k in range(s) if ex.ids[k] == eot), default=0)
            answer = tok.decode(ex.ids[s:e]).strip()
            context = tok.decode(ex.ids[episode_start:s])
            assert answer and answer in context, (answer, context)
            # copy-invariant tokens: the answer's ids (minus the leading space) occur earlier
            core = tok(answer, add_special_tokens=False)["input_ids"]
            assert _occurs(ex.ids[episode_start:s], core)
            checked += 1
    assert checked > 50


def test_a_row_too_short_for_any_episode_is_a_clear_error(tok):
    import pytest

    with pytest.raises(ValueError, match="seq-len"):
        DenseCopySource(tok, 8).row(random.Random(0), 8)
