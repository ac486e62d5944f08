"""Small evaluation helpers for training: held-out loss and block-diffusion greedy decoding.

The decoder here is a deliberately simple, uncached reference (full recompute with a 4-D
block-causal mask every step) used only to measure copy accuracy and TPF during training; the
product engine lives in clover_cli.engine.engine."""
from __future__ import annotations

import torch

from clover_cli.engine.config import DEFAULT_THRESHOLD
from clover_cli.training.blockdiff import additive_mask, block_ids


def block_causal(n: int, block_size: int, device=None) -> torch.Tensor:
    """Bool [n, n]: query may attend key when key block <= query block."""
    b = block_ids(n, block_size, device)
    return b[:, None] >= b[None, :]


@torch.no_grad()
def bd_generate(model, prompt: list[int], mask_id: int, eos_ids: tuple[int, ...],
                block_size: int = 32, max_new: int = 64, threshold: float = DEFAULT_THRESHOLD,
                ) -> tuple[list[int], int]:
    """Greedy block-diffusion decoding (absolute block alignment, i predicts i).

    Positions after the first committed EOS of a block are never decoded (the engine's rule:
    they are cut from the output), so a block ends once everything before its EOS is committed.
    Returns (generated ids cut after the first EOS, number of forwards)."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    seq = list(prompt)
    start = len(seq)
    forwards = 0
    while len(seq) - start < max_new:
        blk_end = (len(seq) // block_size + 1) * block_size
        blk_end = min(blk_end, start + max_new)
        seq += [mask_id] * (blk_end - len(seq))
        ids = torch.tensor([seq], device=device)  # [1, L]
        mask4 = additive_mask(block_causal(len(seq), block_size, device), dtype)
        while True:
            lo = max(start, blk_end - block_size)
            eos_at = next((i for i in range(lo, blk_end) if seq[i] in eos_ids), blk_end)
            masked = [i for i in range(lo, eos_at) if seq[i] == mask_id]
            if not masked:
                break
            logits = model(input_ids=ids, attention_mask=mask4, use_cache=False).logits[0].float()
            forwards += 1
            logits[:, mask_id] = torch.finfo(logits.dtype).min
            probs = logits[masked].softmax(-1)  # [M, V]
            conf, tok = probs.max(-1)
            commit = (conf > threshold).nonzero().flatten().tolist() or [int(conf.argmax())]
            for j in commit:
                seq[masked[j]] = int(tok[j])
                ids[0, masked[j]] = int(tok[j])
        out = seq[start:]
        for k, t in enumerate(out):
            if t in eos_ids:
                return out[:k + 1], forwards
    return seq[start:start + max_new], forwards
