"""An uncached block decoder: every step recomputes the whole sequence with a 4-D block-causal
float mask. The cached engine must match it token for token (docs/engine.md, exactness test 1).

It follows the engine's default rule: the whole block is decoded (the output is cut at the
budget afterwards), selection is never confined before a committed EOS, and the family's own
first-token rule, sub-blocks, stop ids and softmax are honoured."""
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
    fam = lm.family
    B, mask_id = block_size, lm.mask_token_id
    eos = set(fam.stop_ids if fam.stop_ids is not None else lm.eos_token_ids)
    sub = min(B, fam.sub_block or B)
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
        masked[fixed:] = True
        if fam.first_token_rule and not fixed and context:
            row = full_logits(lm.model, context, B)[-1]
            row[mask_id] = float("-inf")
            block[0] = int(row.argmax())
            masked[0] = False
        steps, selected_stop = 0, not fam.first_token_rule
        while masked[fixed:end].any():
            logits = full_logits(lm.model, context + block, B)
            if fam.shifted_logits:  # row i-1 predicts token i
                logits = torch.cat([logits[:1], logits[:-1]])
            logits = logits[start:start + B]
            live = masked.clone()
            first = int(torch.nonzero(live).flatten()[0]) // sub * sub
            live[:first] = False
            live[first + sub:] = False
            tokens, _, commit = select_reference(logits, live, threshold, 0.0, mask_id,
                                                 mask_in_softmax=fam.mask_in_softmax)
            for j in torch.nonzero(commit).flatten().tolist():
                block[j] = int(tokens[j])
                selected_stop = selected_stop or block[j] in eos
            masked &= ~commit
            steps += 1
            firsts = [j for j in range(fixed, end) if not masked[j] and block[j] in eos]
            if selected_stop and firsts and not masked[fixed:firsts[0]].any():
                generated += block[fixed:firsts[0] + 1]
                steps_per_block.append(steps)
                cut = next(i for i, t in enumerate(generated) if t in eos)
                return generated[:cut + 1], steps_per_block
        steps_per_block.append(steps)
        generated += block[fixed:end]
        context += block
        start += B
    return generated, steps_per_block
