"""The block-diffusion training objective (SDAR / BD3-LM recipe).

Arriola et al. 2025, "Block Diffusion" (BD3-LM) and SDAR (JetAstra 2025): the sequence is cut
into blocks of `block_size` at absolute positions; every block gets its own mask ratio; the
model sees the concatenation [noisy ; clean] (length 2N) under ONE 4-D additive mask:

* noisy block b attends bidirectionally to noisy block b and to clean blocks < b;
* clean tokens attend block-causally to clean tokens (blocks <= own block);
* clean never attends to noisy.

Position ids of the noisy copy equal the clean positions. Our convention: position i predicts
token i (no shift), so the loss is taken on the masked positions of the noisy half only.

EOS fill (`fill_id`): at inference the positions after an answer's <|im_end|> in its last block
are masked and must be decoded too, so in the noisy half the rest of the block after an
assistant turn's closing EOS is EOS, maskable and scored, while the clean half keeps the real
tokens that later blocks read. This is the SFT practice of LLaDA (Nie et al. 2025) and SDAR of
padding a response with EOS; without it those positions showed the next turn's real tokens,
unmasked, so the model never learned where an answer ends inside a block.
"""
from __future__ import annotations

import torch


def block_ids(n: int, block_size: int, device=None) -> torch.Tensor:
    """Absolute block index of every position: [n]."""
    return torch.arange(n, device=device) // block_size


def bd_allowed(n: int, block_size: int, device=None) -> torch.Tensor:
    """Boolean attention pattern of the [noisy ; clean] layout: [2n, 2n], True = may attend."""
    b = block_ids(n, block_size, device)  # [n]
    same = b[:, None] == b[None, :]  # [n, n]
    earlier = b[:, None] > b[None, :]  # [n, n] key block strictly before query block
    upto = b[:, None] >= b[None, :]  # [n, n]
    zeros = torch.zeros(n, n, dtype=torch.bool, device=device)
    top = torch.cat([same, earlier], dim=1)  # noisy queries: [n, 2n]
    bottom = torch.cat([zeros, upto], dim=1)  # clean queries: [n, 2n]
    return torch.cat([top, bottom], dim=0)  # [2n, 2n]


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype, pad: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """Float additive mask (0 / finfo.min) of shape [B, 1, L, L] from a bool pattern [L, L].

    `pad` ([B, L] bool, True = padding key) additionally hides padded keys. A bool 4-D mask is
    silently wrong on the eager backend of transformers 5.24, hence the float form."""
    neg = torch.finfo(dtype).min
    m = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    m = m.masked_fill(~allowed, neg)[None, None]  # [1, 1, L, L]
    if pad is not None:
        m = m.expand(pad.shape[0], 1, -1, -1).clone()
        m = m.masked_fill(pad[:, None, None, :], neg)  # [B, 1, L, L]
    return m


def noise_blocks(ids: torch.Tensor, block_size: int, mask_id: int, generator: torch.Generator,
                 loss_ok: torch.Tensor | None = None, t_min: float = 0.05,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask each block with its own ratio t ~ U(t_min, 1).

    ids: [B, N]. loss_ok: [B, N] bool, positions that may be masked (e.g. assistant tokens).
    Returns (noisy ids [B, N], masked [B, N] bool). Every block with a maskable position gets at
    least one masked position, so each block contributes to the loss."""
    bsz, n = ids.shape
    nb = (n + block_size - 1) // block_size
    t = t_min + (1 - t_min) * torch.rand(bsz, nb, generator=generator)  # [B, nb]
    t_tok = t.repeat_interleave(block_size, dim=1)[:, :n]  # [B, N]
    u = torch.rand(bsz, n, generator=generator)  # [B, N]
    ok = torch.ones_like(ids, dtype=torch.bool) if loss_ok is None else loss_ok.cpu()
    masked = (u < t_tok) & ok
    # force one masked position per block that has none but could have: the lowest-u one
    u_ok = torch.where(ok, u, torch.full_like(u, 2.0))
    pad_n = nb * block_size - n
    u_blk = torch.nn.functional.pad(u_ok, (0, pad_n), value=2.0).view(bsz, nb, block_size)
    amin = u_blk.argmin(dim=-1)  # [B, nb]
    has = masked.new_zeros(bsz, nb * block_size)
    has[:, :n] = masked
    need = ~has.view(bsz, nb, block_size).any(-1) & (u_blk.min(-1).values < 2.0)  # [B, nb]
    force = torch.zeros(bsz, nb, block_size, dtype=torch.bool)
    force.scatter_(2, amin[..., None], need[..., None])
    masked = masked | force.view(bsz, -1)[:, :n]
    masked = masked.to(ids.device)
    noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
    return noisy, masked


def eos_fill(ids: torch.Tensor, loss_ok: torch.Tensor, block_size: int, eos_id: int
             ) -> torch.Tensor:
    """Positions after an assistant turn's closing EOS, up to the end of that EOS's block: [B, N].

    A closing EOS is a scored position (loss_ok) holding `eos_id` whose next position is not
    scored (the turn ended). ids, loss_ok: [B, N]."""
    bsz, n = ids.shape
    nxt = torch.zeros_like(loss_ok)
    nxt[:, :-1] = loss_ok[:, 1:]
    end = loss_ok & (ids == eos_id) & ~nxt  # [B, N]
    nb = (n + block_size - 1) // block_size
    padded = torch.nn.functional.pad(end.long(), (0, nb * block_size - n))
    seen = padded.view(bsz, nb, block_size).cumsum(-1).view(bsz, -1)[:, :n]  # ends so far in block
    return (seen - end.long()) > 0  # strictly after an end, same block


def bd_forward_loss(model, ids: torch.Tensor, block_size: int, mask_id: int,
                    generator: torch.Generator, loss_ok: torch.Tensor | None = None,
                    pad: torch.Tensor | None = None, full_mask: bool = False,
                    fill_id: int | None = None) -> tuple[torch.Tensor, int]:
    """One block-diffusion forward on ids [B, N]; returns (mean CE over masked positions, count).

    full_mask=True masks every maskable position (ratio 1): with block_size=1 this is the
    auxiliary AR loss in our i-predicts-i convention (a mask at i, clean tokens < i visible).
    fill_id: the EOS id for EOS fill (module docstring); None trains without it."""
    bsz, n = ids.shape
    targets = ids  # what the noisy half reconstructs
    noisy_pad = pad
    if fill_id is not None and loss_ok is not None and block_size > 1:
        after = eos_fill(ids, loss_ok, block_size, fill_id)  # [B, N]
        if bool(after.any()):
            targets = torch.where(after, torch.full_like(ids, fill_id), ids)
            loss_ok = loss_ok | after
            noisy_pad = None if pad is None else pad & ~after
    if full_mask:
        masked = torch.ones_like(ids, dtype=torch.bool) if loss_ok is None else loss_ok.clone()
        noisy = torch.where(masked, torch.full_like(ids, mask_id), targets)
    else:
        noisy, masked = noise_blocks(targets, block_size, mask_id, generator, loss_ok)
    dtype = next(model.parameters()).dtype
    allowed = bd_allowed(n, block_size, ids.device)  # [2N, 2N]
    pad2 = None if pad is None else torch.cat([noisy_pad, pad], dim=1)  # [B, 2N]
    mask4 = additive_mask(allowed, dtype, pad2)  # [B|1, 1, 2N, 2N]
    if mask4.shape[0] != bsz:
        mask4 = mask4.expand(bsz, -1, -1, -1)
    pos = torch.arange(n, device=ids.device)
    pos = torch.cat([pos, pos])[None].expand(bsz, -1)  # [B, 2N]
    inp = torch.cat([noisy, ids], dim=1)  # [B, 2N]
    count = int(masked.sum())
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    body = getattr(model, "model", None)
    if head is not None and body is not None:
        # The output head only where the loss is taken (masked positions of the noisy half): on
        # a small-vocabulary model the head over all 2N positions was ~30% of the step.
        hidden = body(input_ids=inp, attention_mask=mask4, position_ids=pos,
                      use_cache=False).last_hidden_state[:, :n]  # [B, N, H]
        if count == 0:
            return hidden.sum() * 0.0, 0
        logits = head(hidden[masked])  # [count, V]
    else:
        out = model(input_ids=inp, attention_mask=mask4, position_ids=pos, use_cache=False)
        if count == 0:
            return out.logits.sum() * 0.0, 0
        logits = out.logits[:, :n][masked]  # [count, V]
    logits = logits.float()
    logits[..., mask_id] = torch.finfo(logits.dtype).min  # the mask is never a prediction
    loss = torch.nn.functional.cross_entropy(logits, targets[masked])
    return loss, count


def heldout_loss(model, rows, block_size: int, mask_id: int, seed: int = 1234) -> float:
    """Mean block-diffusion loss over fixed held-out rows (fixed noise seed)."""
    gen = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    device = next(model.parameters()).device
    with torch.no_grad():
        for ex in rows:
            ids = torch.tensor([ex.ids], device=device)
            ok = torch.tensor([ex.loss_ok], device=device)
            loss, c = bd_forward_loss(model, ids, block_size, mask_id, gen, loss_ok=ok)
            total += float(loss) * c
            count += c
    return total / max(count, 1)
