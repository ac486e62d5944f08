"""The [noisy ; clean] training mask is what the SDAR/BD3-LM recipe says, and on the eager
backend it reproduces the inference view (clean earlier blocks + one noisy block)."""
from __future__ import annotations

import pytest
import torch

from clover_cli.training import blockdiff
from clover_cli.training.evaluate import block_causal


def test_pattern_entries():
    n, bs = 8, 4  # 2 blocks
    a = blockdiff.bd_allowed(n, bs)  # [16, 16]
    assert a.shape == (16, 16)
    # noisy 5 (block 1): noisy block 1 bidirectional, clean block 0 only
    assert a[5, 4:8].all() and not a[5, :4].any()
    assert a[5, 8:12].all() and not a[5, 12:16].any()
    # noisy 1 (block 0): noisy block 0 only, no clean at all
    assert a[1, :4].all() and not a[1, 4:].any()
    # clean 9 (block 0): clean block 0 only (bidirectional inside), never noisy
    assert a[9, 8:12].all() and not a[9, 12:].any() and not a[9, :8].any()
    # clean 13 (block 1): clean blocks 0-1
    assert a[13, 8:16].all() and not a[13, :8].any()


def test_float_mask_values():
    a = blockdiff.bd_allowed(4, 2)
    m = blockdiff.additive_mask(a, torch.float32)
    assert m.shape == (1, 1, 8, 8) and m.dtype == torch.float32
    assert (m[0, 0][a] == 0).all()
    assert (m[0, 0][~a] == torch.finfo(torch.float32).min).all()


def _logits(model, ids, mask4, pos=None):
    return model(input_ids=ids, attention_mask=mask4, position_ids=pos, use_cache=False).logits


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_noisy_half_equals_inference_view(micro_model, attn):
    micro_model.config._attn_implementation = attn
    torch.manual_seed(1)
    n, bs, mask_id = 12, 4, micro_model.config.mask_token_id
    clean = torch.randint(20, 4000, (1, n))
    noisy = clean.clone()
    noisy[0, [1, 5, 6, 10, 11]] = mask_id
    allowed = blockdiff.bd_allowed(n, bs)
    pos = torch.cat([torch.arange(n), torch.arange(n)])[None]
    full = _logits(micro_model, torch.cat([noisy, clean], 1),
                   blockdiff.additive_mask(allowed, torch.float32), pos)[0]  # [2n, V]
    for b in range(n // bs):
        # inference view: clean blocks < b followed by the noisy block b, block-causal mask
        ids = torch.cat([clean[:, :b * bs], noisy[:, b * bs:(b + 1) * bs]], 1)
        m = blockdiff.additive_mask(block_causal(ids.shape[1], bs), torch.float32)
        ref = _logits(micro_model, ids, m)[0, b * bs:]
        torch.testing.assert_close(full[b * bs:(b + 1) * bs], ref, atol=1e-5, rtol=1e-5)
    # the clean half is the plain block-causal forward of the clean sequence
    ref = _logits(micro_model, clean, blockdiff.additive_mask(block_causal(n, bs), torch.float32))[0]
    torch.testing.assert_close(full[n:], ref, atol=1e-5, rtol=1e-5)


def test_block1_layout_is_autoregressive(micro_model):
    """Block size 1 + every position masked = next-token prediction in i-predicts-i form."""
    torch.manual_seed(2)
    n, mask_id = 6, micro_model.config.mask_token_id
    clean = torch.randint(20, 4000, (1, n))
    noisy = torch.full_like(clean, mask_id)
    pos = torch.cat([torch.arange(n), torch.arange(n)])[None]
    full = _logits(micro_model, torch.cat([noisy, clean], 1),
                   blockdiff.additive_mask(blockdiff.bd_allowed(n, 1), torch.float32), pos)[0]
    for i in range(n):  # position i sees clean[:i] and a mask at i
        ids = torch.cat([clean[:, :i], torch.tensor([[mask_id]])], 1)
        ref = _logits(micro_model, ids, blockdiff.additive_mask(block_causal(i + 1, 1),
                                                               torch.float32))[0, -1]
        torch.testing.assert_close(full[i], ref, atol=1e-5, rtol=1e-5)


def test_noise_blocks_ratios_and_loss_ok():
    gen = torch.Generator().manual_seed(0)
    ids = torch.arange(100, 164).view(1, 64).repeat(4, 1)
    ok = torch.ones_like(ids, dtype=torch.bool)
    ok[:, :10] = False
    noisy, masked = blockdiff.noise_blocks(ids, 32, 3, gen, ok)
    assert not masked[:, :10].any()
    assert (noisy[masked] == 3).all() and (noisy[~masked] == ids[~masked]).all()
    assert masked.view(4, 2, 32).any(-1).all()  # every block contributes to the loss


def test_head_on_masked_positions_only_matches_full_logits(micro_model):
    """The trainer applies the output head only where the loss is taken; the loss must equal the
    one computed from the full [noisy ; clean] logits."""
    import torch

    from clover_cli.training import blockdiff

    ids = torch.randint(20, 300, (2, 64))
    fast, n1 = blockdiff.bd_forward_loss(micro_model, ids, 32, 3, torch.Generator().manual_seed(5))
    full_model = _NoHead(micro_model)
    slow, n2 = blockdiff.bd_forward_loss(full_model, ids, 32, 3, torch.Generator().manual_seed(5))
    assert n1 == n2 > 0
    assert torch.allclose(fast, slow, atol=1e-5), (fast, slow)


class _NoHead(__import__("torch").nn.Module):
    """The same model seen without get_output_embeddings / .model: the full-logits path."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, **kw):
        return self.inner(**kw)


def test_eos_fill_marks_the_rest_of_the_answer_block():
    """After an assistant turn's closing EOS (scored, next position unscored), the rest of its
    block is filled; a user turn's EOS (unscored) and the next block are not."""
    eos = 2
    ids = torch.full((1, 16), 50)
    ok = torch.zeros(1, 16, dtype=torch.bool)
    ids[0, 1] = eos  # a user turn's EOS: not scored
    ok[0, 2:6] = True  # an answer ending at 5 with EOS
    ids[0, 5] = eos
    ok[0, 9:11] = True  # an answer crossing into block 2 (ends at 10)
    ids[0, 10] = eos
    after = blockdiff.eos_fill(ids, ok, 8, eos)
    assert after[0].nonzero().flatten().tolist() == [6, 7, 11, 12, 13, 14, 15]
    assert not blockdiff.eos_fill(ids, ok, 1, eos).any()  # AR layout: nothing after in-block


class _Recorder(__import__("torch").nn.Module):
    """Records what the trainer's forward is given (full-logits path)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.seen = {}

    def forward(self, **kw):
        self.seen = kw
        return self.inner(**kw)


def test_eos_fill_noisy_half_reconstructs_eos_and_clean_half_keeps_tokens(micro_model):
    eos, mask = 2, 3
    n = 64
    ids = torch.randint(20, 300, (1, n))
    ok = torch.zeros(1, n, dtype=torch.bool)
    ok[0, 36:41] = True  # an answer 36..40, EOS at 40; 41..63 is the next turn, then padding
    ids[0, 40] = eos
    pad = torch.zeros(1, n, dtype=torch.bool)
    pad[0, 56:] = True
    ids[0, 56:] = 1
    rec = _Recorder(micro_model)
    loss, count = blockdiff.bd_forward_loss(rec, ids, 32, mask, torch.Generator().manual_seed(3),
                                            loss_ok=ok, pad=pad, fill_id=eos)
    inp = rec.seen["input_ids"][0]
    noisy, clean = inp[:n], inp[n:]
    assert torch.equal(clean, ids[0])  # later blocks read the real tokens
    assert set(noisy[41:].tolist()) <= {eos, mask}  # the filled tail: EOS, or masked to predict
    assert (noisy[:36] == ids[0, :36]).all()  # the prompt stays as it was
    m4 = rec.seen["attention_mask"][0, 0]
    neg = torch.finfo(m4.dtype).min
    assert (m4[41, 56:64] == 0).all()  # filled pad positions are real keys in the noisy half
    assert (m4[n + 60, n + 56:] == neg).all()  # ... and still padding in the clean half
    masked_in_fill = int((noisy[41:] == mask).sum())
    _, plain = blockdiff.bd_forward_loss(rec, ids, 32, mask, torch.Generator().manual_seed(3),
                                         loss_ok=ok, pad=pad)
    assert count > plain and masked_in_fill > 0  # the fill is scored
