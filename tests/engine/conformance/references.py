"""Independent reference decoders, one per family, written from the public reference generate
code (read to learn; nothing imported from clover_cli.engine). Batch size 1, greedy.

Every forward recomputes the whole sequence under a block-causal mask (a block sees itself and
every earlier block); the references' KV caches hold exactly those keys, so the logits are the
same. Sources:
- SDAR: JetAstra/SDAR `generate.py`, `block_diffusion_generate` with
  `remasking_strategy='low_confidence_dynamic'` and `denoising_steps = block_length` (one forced
  commit per step), stopping after the block in which a stop id appears.
- LLaDA2.0 / 2.1: inclusionAI's `generate` in the checkpoints' modeling_llada2_moe.py (as
  mirrored in the public dllm repository, pipelines/llada2 and pipelines/llada21).
- Fast-dLLM v2: NVlabs/Fast-dLLM v2 `Fast_dLLM_QwenForCausalLM.batch_sample` (the checkpoint's
  generation code): logits shifted by one inside the block, sub-blocks of `small_block_size`,
  the finished block's forward gives the next block's first token by argmax, stop_token only.
"""
from __future__ import annotations

import torch


def _mask(length: int, block: int, dtype) -> torch.Tensor:
    idx = torch.arange(length) // block
    allowed = idx[None, :] <= idx[:, None]
    out = torch.zeros(length, length, dtype=dtype)
    out.masked_fill_(~allowed, torch.finfo(dtype).min)
    return out[None, None]


def _logits(model, ids: list[int], block: int) -> torch.Tensor:
    dtype = next(model.parameters()).dtype
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), position_ids=torch.arange(len(ids))[None],
                    attention_mask=_mask(len(ids), block, dtype), use_cache=False)
    return out.logits[0].double()


def sdar_generate(model, prompt: list[int], *, mask_id: int, gen_length: int, block_length: int,
                  threshold: float, stop_ids: set[int]) -> list[int]:
    n = len(prompt)
    num_blocks = (n + gen_length + block_length - 1) // block_length
    x = list(prompt) + [mask_id] * (num_blocks * block_length - n)
    for b in range(n // block_length, num_blocks):
        lo, hi = b * block_length, (b + 1) * block_length
        for _ in range(block_length + 1):
            masked = [i for i in range(lo, hi) if x[i] == mask_id]
            if not masked:
                break
            logits = _logits(model, x[:hi], block_length)[lo:hi]
            probs = torch.softmax(logits, dim=-1)
            x0 = logits.argmax(dim=-1)
            conf = torch.full((block_length,), float("-inf"), dtype=torch.float64)
            for i in masked:
                conf[i - lo] = probs[i - lo, x0[i - lo]]
            high = conf > threshold
            transfer = high if int(high.sum()) >= 1 else torch.zeros_like(high)
            if int(high.sum()) < 1:
                transfer[int(conf.argmax())] = True
            for j in torch.nonzero(transfer).flatten().tolist():
                x[lo + j] = int(x0[j])
        if any(t in stop_ids for t in x[n:hi]):
            break
    out = x[n:n + gen_length]
    for i, t in enumerate(out):
        if t in stop_ids:
            return out[:i + 1]
    return out


def fast_dllm_generate(model, prompt: list[int], *, mask_id: int, max_new_tokens: int,
                       block_size: int, small_block_size: int, threshold: float,
                       stop_token: int) -> list[int]:
    """Decodes whole blocks, those holding the budget (batch_sample decodes whole blocks and
    opens none past its budget), then cuts. A stop selected anywhere in a block, past the budget
    too, ends the run, cut after the output's first stop (a first-token-rule one included)."""
    B, S = block_size, small_block_size
    n = len(prompt)
    num_blocks = (n + max_new_tokens + B - 1) // B
    x = list(prompt)
    if n >= B and n % B == 0:  # the prefill's last position opens the next block
        x.append(int(_logits(model, x, B)[-1].argmax()))
    finished = False
    for b in range(n // B, num_blocks):
        lo, hi = b * B, (b + 1) * B
        x = x + [mask_id] * (hi - len(x))
        for s in range(B // S):
            s_lo, s_hi = lo + s * S, lo + (s + 1) * S
            while any(x[i] == mask_id for i in range(s_lo, s_hi)):
                logits = _logits(model, x[:hi], B)[lo:hi]
                logits = torch.cat([logits[:1], logits[:-1]])[s * S:(s + 1) * S]
                x1 = logits.argmax(dim=-1)
                p = torch.softmax(logits, dim=-1).gather(1, x1[:, None])[:, 0]
                finished = fast_dllm_commit(x, s_lo, s_hi, x1, p, mask_id, threshold, stop_token) or finished
        if finished:
            break
        x.append(int(_logits(model, x[:hi], B)[-1].argmax()))
    out = x[n:]
    if finished:
        out = out[:out.index(stop_token) + 1]
    return out[:max_new_tokens]


def fast_dllm_commit(x: list[int], s_lo: int, s_hi: int, tok: torch.Tensor, conf: torch.Tensor,
                     mask_id: int, threshold: float, stop_token: int) -> bool:
    """batch_sample's commit in the sub-block x[s_lo:s_hi]: its masked positions whose
    confidence is above the threshold, and the most confident one always; whether a stop was
    among the tokens committed (which ends the run after this block)."""
    live = torch.tensor([x[i] == mask_id for i in range(s_lo, s_hi)])
    conf = torch.where(live, conf, torch.tensor(float("-inf"), dtype=conf.dtype))
    pick = conf > threshold
    pick[int(conf.argmax())] = True
    pick &= live
    for j in torch.nonzero(pick).flatten().tolist():
        x[s_lo + j] = int(tok[j])
    return bool(((tok == stop_token) & pick).any())


def llada2_generate(model, prompt: list[int], *, mask_id: int, gen_length: int, block_length: int,
                    steps: int, threshold: float, eos_id: int) -> list[int]:
    """inclusionAI LLaDA2.0 `generate` (eos_early_stop off): every block gets `steps` denoise
    steps with a transfer schedule spreading block_length over them; each step commits the
    positions above the threshold when there are at least as many as scheduled, else the most
    confident ones; the output is cut after the first EOS."""
    steps = min(steps, gen_length)
    n = len(prompt)
    num_blocks = (n + gen_length + block_length - 1) // block_length
    x = list(prompt) + [mask_id] * (num_blocks * block_length - n)
    base, extra = divmod(block_length, steps)
    schedule = [base + (1 if i < extra else 0) for i in range(steps)]
    for b in range(n // block_length, num_blocks):
        lo, hi = b * block_length, (b + 1) * block_length
        for step in range(steps):
            masked = [i - lo for i in range(lo, hi) if x[i] == mask_id]
            if not masked:
                break
            logits = _logits(model, x[:hi], block_length)[lo:hi]
            probs = torch.softmax(logits, dim=-1)
            x0 = logits.argmax(dim=-1)
            conf = torch.full((block_length,), float("-inf"), dtype=torch.float64)
            for j in masked:
                conf[j] = probs[j, x0[j]]
            high = conf > threshold
            if int(high.sum()) >= schedule[step]:
                chosen = torch.nonzero(high).flatten().tolist()
            else:
                chosen = conf.topk(min(schedule[step], len(masked))).indices.tolist()
            for j in chosen:
                x[lo + j] = int(x0[j])
    out = x[n:n + gen_length]
    return out[:out.index(eos_id) + 1] if eos_id in out else out


def llada21_generate(model, prompt: list[int], *, mask_id: int, gen_length: int, block_length: int,
                     threshold: float, editing_threshold: float, max_post_steps: int, eos_id: int,
                     edits: list | None = None) -> list[int]:
    """inclusionAI LLaDA2.1 `generate` (greedy, num_to_transfer 1, eos_early_stop off): per block,
    loop: a step that starts with no mask counts a post step and the loop ends past
    max_post_steps; the step commits the masked positions above `threshold` (else the most
    confident one) and rewrites every position that was neither masked at the step's start nor
    prompt whose argmax differs with probability above `editing_threshold`; the loop ends after a
    step that started with no mask and rewrote nothing. Output cut after the first EOS.
    edits: when a list, (block, step, position, old, new) is appended for every rewrite."""
    n = len(prompt)
    num_blocks = (n + gen_length + block_length - 1) // block_length
    x = list(prompt) + [mask_id] * (num_blocks * block_length - n)
    for b in range(n // block_length, num_blocks):
        lo, hi = b * block_length, (b + 1) * block_length
        post, step = 0, 0
        while True:
            before = x[lo:hi]
            was_masked = [t == mask_id for t in before]
            if not any(was_masked):
                post += 1
            if post > max_post_steps:
                break
            logits = _logits(model, x[:hi], block_length)[lo:hi]
            probs = torch.softmax(logits, dim=-1)
            x0 = logits.argmax(dim=-1)
            p0 = probs.gather(1, x0[:, None])[:, 0]
            write = set()
            if any(was_masked):
                conf = torch.where(torch.tensor(was_masked), p0, torch.tensor(float("-inf"), dtype=p0.dtype))
                high = [j for j in range(block_length) if was_masked[j] and float(conf[j]) > threshold]
                write.update(high if high else [int(conf.topk(1).indices[0])])
            rewritten = [j for j in range(block_length)
                         if not was_masked[j] and lo + j >= n and int(x0[j]) != before[j]
                         and float(p0[j]) > editing_threshold]
            write.update(rewritten)
            for j in sorted(write):
                if edits is not None and j in rewritten:
                    edits.append((b, step, j, before[j], int(x0[j])))
                x[lo + j] = int(x0[j])
            step += 1
            if not any(was_masked) and not rewritten:
                break
    out = x[n:n + gen_length]
    return out[:out.index(eos_id) + 1] if eos_id in out else out
