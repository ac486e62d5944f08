"""An uncached block decoder: every step recomputes the whole sequence with a 4-D block-causal
float mask. The cached engine must match it token for token (DESIGN.md exactness test 1)."""
from __future__ import annotations

import torch

from clover_cli.engine.runtime import block_causal_mask
from clover_cli.engine.selection import select as select_reference


def full_logits(model, seq: list[int], block_size: int) -> torch.Tensor:
    ids = torch.tensor(seq)
    positions = torch.arange(len(seq))
    dtype = next(model.parameters()).dtype
    mask = block_causal_mask(positions, len(seq), block_size, dtype)
    with torch.inference_mode():
        out = model(input_ids=ids[None], position_ids=positions[None], attention_mask=mask, use_cache=False)
    return out.logits[0].float()  # [T, V]


def oracle_decode(lm, prompt: list[int], max_new: int, threshold: float, block_size: int):
    """Returns (generated ids incl. EOS, steps per block)."""
    B, mask_id, eos = block_size, lm.mask_token_id, set(lm.eos_token_ids)
    n = len(prompt)
    limit = n + max_new
    start = (n // B) * B
    context = list(prompt[:start])
    generated, steps_per_block = [], []
    while start < limit:
        fixed = max(0, n - start)
        block = list(prompt[start:n]) + [mask_id] * (B - fixed)
        end = min(B, limit - start)
        masked = torch.zeros(B, dtype=torch.bool)
        masked[fixed:end] = True
        steps, done = 0, False
        while masked.any():
            logits = full_logits(lm.model, context + block, B)
            if lm.family.shifted_logits:  # row i-1 predicts token i
                logits = torch.cat([logits[:1], logits[:-1]])
            logits = logits[start:start + B]
            live = masked.clone()  # never select positions after the first committed EOS
            cut = [j for j in range(fixed, end) if not masked[j] and block[j] in eos]
            if cut:
                live[cut[0]:] = False
            tokens, _, commit = select_reference(logits, live, threshold, 0.0, mask_id)
            for j in torch.nonzero(commit).flatten().tolist():
                block[j] = int(tokens[j])
            masked &= ~commit
            steps += 1
            firsts = [j for j in range(fixed, end) if not masked[j] and block[j] in eos]
            if firsts and not masked[fixed:firsts[0]].any():
                generated += block[fixed:firsts[0] + 1]
                steps_per_block.append(steps)
                return generated, steps_per_block
        steps_per_block.append(steps)
        generated += block[fixed:end]
        context += block
        start += B
    return generated, steps_per_block
