"""Reference decoders that keep a KV cache the way the released generates do, for the dtypes
where rounding depends on the shape of each forward (bfloat16). Written from the public code
(read to learn; nothing imported from clover_cli.engine), greedy, batch size 1, on transformers'
own network with transformers' own `DynamicCache`:

- SDAR: JetAstra/SDAR `generate.py` `block_diffusion_generate` (`low_confidence_dynamic`,
  `denoising_steps = block_length`): the prompt's whole blocks prefilled by one block-causal
  forward that stores its keys/values; per block, each denoise step one forward of the block
  against the cache that stores nothing (`store_kv=False`); the finished block one more forward
  that stores it (`store_kv=True`); the next block's first step its own forward. Stops after the
  block in which a stop id appears.
- Fast-dLLM v2: the checkpoint's `batch_sample` with `use_block_cache=False`: the prompt's whole
  blocks prefilled by one forward (only when the prompt is longer than a block; its last row's
  argmax opens the next block when the prompt ends on a boundary); each step one forward of the
  whole block against the cache (`update_past_key_values=False`), logits shifted by one, sub-blocks
  in order; the finished block one forward that stores it, whose last row's argmax opens the next.

Both take the step's token as the argmax of the softmax of the logits as they come (bfloat16 on a
bfloat16 network; the first index of a tie) and compare the threshold to that probability;
the mask token is never a prediction. A denoise forward (every key visible) gets a zero
additive mask, the prefill a block-causal one, as the network's 4-D mask argument takes them.
"""
from __future__ import annotations

import copy

import torch

from references import fast_dllm_commit


def _block_causal(q0: int, q1: int, kv: int, block: int, dtype) -> torch.Tensor:
    """Additive mask [1, 1, q1 - q0, kv]: a query sees a key in its own block or an earlier one."""
    q = torch.arange(q0, q1) // block
    k = torch.arange(kv) // block
    out = torch.zeros(q1 - q0, kv, dtype=dtype)
    out.masked_fill_(k[None, :] > q[:, None], torch.finfo(dtype).min)
    return out[None, None]


class CachedNet:
    """transformers' network with a DynamicCache: run(ids, start, store) -> logits [T, V] in the
    network's dtype; store False puts the cache back to `start` positions afterwards."""

    def __init__(self, model, block: int):
        from transformers import DynamicCache

        self.model, self.block = model, block
        self.dtype = next(model.parameters()).dtype
        self.cache = DynamicCache(config=model.config)

    def run(self, ids: list[int], start: int, store: bool) -> torch.Tensor:
        end = start + len(ids)
        mask = _block_causal(start, end, end, self.block, self.dtype)
        # store False: keys/values cropped after; a recurrent (GDN) state cannot be, so a network
        # with one runs on a copy of the cache
        recurrent = any(type(layer).__name__ == "LinearAttentionLayer" for layer in self.cache.layers)
        cache = copy.deepcopy(self.cache) if recurrent and not store else self.cache
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([ids]), position_ids=torch.arange(start, end)[None],
                             attention_mask=mask, cache=cache, use_cache=True)
        if not store and not recurrent:
            self.cache.crop(-len(ids))  # transformers 5: a negative count removes that many
        return out.logits[0]


def _greedy(logits: torch.Tensor, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(token [T], confidence [T]): argmax of the softmax in the logits' dtype, mask excluded."""
    probs = torch.softmax(logits, dim=-1)
    ranked = probs.clone()
    ranked[:, mask_id] = float("-inf")
    tok = ranked.argmax(dim=-1)
    return tok, probs.gather(1, tok[:, None])[:, 0]


def _first_token(row: torch.Tensor, mask_id: int) -> int:
    row = row.clone()
    row[mask_id] = float("-inf")
    return int(row.argmax())


def _note(trace: list | None, x: list[int], lo: int, hi: int, n: int, limit: int, mask_id: int,
          before: bool) -> None:
    """trace: after each step that began with a masked position inside the budget, the masked
    flags of the block's output positions there (the steps a decoder that stops at the budget
    takes, in the form of its DenoiseStep events)."""
    if trace is not None and before:
        trace.append(tuple(x[i] == mask_id for i in range(max(lo, n), min(hi, limit))))


def _open(x: list[int], lo: int, hi: int, n: int, limit: int, mask_id: int) -> bool:
    return any(x[i] == mask_id for i in range(max(lo, n), min(hi, limit)))


def _blocks_cached(model, prompt: list[int], *, mask_id: int, gen_length: int, block_length: int,
                   threshold: float, stop_ids: set[int], trace: list | None, choose) -> list[int]:
    """The block loop SDAR's generate and our hybrid rule share: prompt blocks prefilled in one
    forward; per block, denoise steps against the cache that store nothing, each committing the
    masked positions above the threshold (else the most confident one) by `choose(logits)` ->
    (token, confidence); the finished block one forward that stores it. Stops after the block in
    which a stop id appears; the output is cut after the first one."""
    B, n = block_length, len(prompt)
    num_blocks = (n + gen_length + B - 1) // B
    x = list(prompt) + [mask_id] * (num_blocks * B - n)
    net = CachedNet(model, B)
    if n // B:
        net.run(x[:n // B * B], 0, store=True)
    for b in range(n // B, num_blocks):
        lo, hi = b * B, (b + 1) * B
        while any(t == mask_id for t in x[lo:hi]):
            before = _open(x, lo, hi, n, n + gen_length, mask_id)
            tok, conf = choose(net.run(x[lo:hi], lo, store=False))
            live = torch.tensor([t == mask_id for t in x[lo:hi]])
            conf = torch.where(live, conf, torch.tensor(float("-inf"), dtype=conf.dtype))
            pick = conf > threshold
            if not bool(pick.any()):
                pick[int(conf.argmax())] = True
            for j in torch.nonzero(pick).flatten().tolist():
                x[lo + j] = int(tok[j])
            _note(trace, x, lo, hi, n, n + gen_length, mask_id, before)
        if any(t in stop_ids for t in x[n:hi]):
            break
        net.run(x[lo:hi], lo, store=True)
    out = x[n:n + gen_length]
    stops = [i for i, t in enumerate(out) if t in stop_ids]
    return out[:stops[0] + 1] if stops else out


def sdar_generate_cached(model, prompt: list[int], *, mask_id: int, gen_length: int,
                         block_length: int, threshold: float, stop_ids: set[int],
                         trace: list | None = None) -> list[int]:
    """SDAR's: the confidence the softmax in the logits' dtype (`_greedy`)."""
    return _blocks_cached(model, prompt, mask_id=mask_id, gen_length=gen_length, block_length=block_length,
                          threshold=threshold, stop_ids=stop_ids, trace=trace,
                          choose=lambda logits: _greedy(logits, mask_id))


def fast_dllm_generate_cached(model, prompt: list[int], *, mask_id: int, max_new_tokens: int,
                              block_size: int, small_block_size: int, threshold: float,
                              stop_token: int, trace: list | None = None) -> list[int]:
    """Decodes whole blocks, those holding the budget (batch_sample decodes whole blocks and
    opens none past its budget), then cuts. A stop selected anywhere in a block, past the budget
    too, ends the run, cut after the output's first stop (a first-token-rule one included)."""
    B, S, n = block_size, small_block_size, len(prompt)
    num_blocks = (n + max_new_tokens + B - 1) // B
    x = list(prompt)
    net = CachedNet(model, B)
    if n > B:
        row = net.run(x[:n // B * B], 0, store=True)[-1]
        if n % B == 0:
            x.append(_first_token(row, mask_id))
    finished = False
    for b in range(n // B, num_blocks):
        lo, hi = b * B, (b + 1) * B
        x = x + [mask_id] * (hi - len(x))
        for s in range(B // S):
            s_lo, s_hi = lo + s * S, lo + (s + 1) * S
            while any(x[i] == mask_id for i in range(s_lo, s_hi)):
                before = _open(x, lo, hi, n, n + max_new_tokens, mask_id)
                logits = net.run(x[lo:hi], lo, store=False)
                logits = torch.cat([logits[:1], logits[:-1]])[s * S:(s + 1) * S]
                tok, conf = _greedy(logits, mask_id)
                finished = fast_dllm_commit(x, s_lo, s_hi, tok, conf, mask_id, threshold, stop_token) or finished
                _note(trace, x, lo, hi, n, n + max_new_tokens, mask_id, before)
        if finished:
            break
        x.append(_first_token(net.run(x[lo:hi], lo, store=True)[-1], mask_id))
    out = x[n:]
    if finished:
        out = out[:out.index(stop_token) + 1]
    return out[:max_new_tokens]


def hybrid_generate_cached(model, prompt: list[int], *, mask_id: int, gen_length: int,
                           block_length: int, threshold: float, stop_ids: set[int],
                           trace: list | None = None) -> list[int]:
    """Our GDN hybrid's rule (no released generate exists: docs/engine.md, the hybrid rows) with
    the cache a block decoder keeps, transformers' own for that network: the prompt's whole
    blocks prefilled in one forward; each denoise step runs the block on a copy of the cache
    (attention keys and Gated DeltaNet state alike: CachedNet.run), so the cache is left as it
    was; the finished block runs on the cache itself. The confidence: a float32 softmax with the mask's logit
    dropped; the token the logits' argmax; commits above the threshold, else the most confident one.
    Stops after the block in which a stop id appears; cut after the first one."""
    def choose(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = logits.float()
        z[:, mask_id] = float("-inf")
        tok = z.argmax(dim=-1)
        return tok, torch.softmax(z, dim=-1).gather(1, tok[:, None])[:, 0]

    return _blocks_cached(model, prompt, mask_id=mask_id, gen_length=gen_length, block_length=block_length,
                          threshold=threshold, stop_ids=stop_ids, trace=trace, choose=choose)
