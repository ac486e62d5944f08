"""Independent reference decoders for the full-attention diffusion families (Dream, LLaDA 1.x),
written from the public reference generate code (read to learn; nothing imported from
clover_cli.engine). Batch size 1, batch dimension kept as the references keep it; every run
decodes the whole canvas (no early stop), then cuts after the first stop id.

- Dream `diffusion_generate` (Dream-org/Dream `generation_utils.py` `_sample`).
- LLaDA `generate` (ML-GSAI/LLaDA `generate.py`, low_confidence remasking, cfg_scale 0).
- Fast-dLLM v1 (NVlabs/Fast-dLLM `dream/model/generation_utils_block.py` `_sample` with
  alg='confidence_threshold', and `llada/generate.py` `generate_with_prefix_cache` /
  `generate_with_dual_cache` with a threshold): the cache is the point of these, so the
  reference keeps its own: the keys/values of the block's first whole-sequence forward, sliced
  to the prefix (prefix) or with the block's entries overwritten by each step's (dual).
Sampling uses torch's global generator, as the references do (seed it before calling).
"""
from __future__ import annotations

import torch
import torch.distributions as dists
import torch.nn.functional as F


class RefCache:
    """Per-layer keys/values of one forward; later forwards see them as Fast-dLLM v1 does."""

    def __init__(self):
        self.kv: dict[int, tuple] = {}
        self.how = None  # None: record; ("prefix", s); ("dual", s, e)

    def update(self, k, v, layer):
        if self.how is None:
            self.kv[layer] = (k, v)
            return k, v
        pk, pv = self.kv[layer]
        if self.how[0] == "prefix":
            s = self.how[1]
            return torch.cat((pk[:, :, :s], k), dim=2), torch.cat((pv[:, :, :s], v), dim=2)
        s, e = self.how[1], self.how[2]
        pk[:, :, s:e] = k
        pv[:, :, s:e] = v
        return pk, pv

    def get_seq_length(self, layer=0):
        return 0


def _run(model, x, start=0, cache=None):
    """x [1, T] at positions start.. -> logits [1, T, V] (no mask: full attention)."""
    pos = torch.arange(start, start + x.shape[1])[None]
    with torch.inference_mode():
        return model(input_ids=x, position_ids=pos, attention_mask=None, cache=cache,
                     use_cache=cache is not None).logits


def _shift(logits):
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def _cut(ids: list[int], stops, limit: int) -> list[int]:
    ids = ids[:limit]
    for i, t in enumerate(ids):
        if t in stops:
            return ids[:i + 1]
    return ids


def _top_p(logits, top_p):
    s, idx = torch.sort(logits, descending=True)
    remove = torch.cumsum(F.softmax(s, dim=-1), dim=-1) > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, idx, remove)
    return logits.masked_fill(mask, torch.finfo(logits.dtype).min)


def dream_sample(logits, temperature=0.0, top_p=None, margin=False, neg_entropy=False):
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        logits = _top_p(logits, top_p)
    probs = torch.softmax(logits, dim=-1)
    if temperature > 0:
        x0 = dists.Categorical(probs=probs).sample()
        conf = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
    else:
        conf, x0 = probs.max(dim=-1)
    if margin:
        sp = torch.sort(probs, dim=-1, descending=True)[0]
        conf = sp[:, 0] - sp[:, 1]
    if neg_entropy:
        conf = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
    return conf, x0


def dream_generate(model, prompt, *, mask_id, max_new_tokens, steps, alg, eps=1e-3, temperature=0.0,
                   top_p=None, stops=()):
    x = torch.tensor([list(prompt) + [mask_id] * max_new_tokens])
    ts = torch.linspace(1, eps, steps + 1)
    for i in range(steps):
        mask_index = x == mask_id
        logits = _shift(_run(model, x))
        mask_logits = logits[mask_index]
        t, s = ts[i], ts[i + 1]
        if alg == "origin":
            p_transfer = 1 - s / t if i < steps - 1 else 1
            x0 = torch.zeros_like(x[mask_index]) + mask_id
            move = torch.rand(*x0.shape) < p_transfer
            _, x0[move] = dream_sample(mask_logits[move], temperature, top_p)
            x[mask_index] = x0.clone()
            continue
        conf, x0 = dream_sample(mask_logits, temperature, top_p, margin=alg == "topk_margin",
                                neg_entropy=alg == "entropy")
        num = mask_index.sum() / mask_index.shape[0]
        k = int(num * (1 - s / t)) if i < steps - 1 else int(num)
        full = torch.full_like(x, -torch.inf, dtype=logits.dtype)
        full[mask_index] = conf
        if k > 0:
            _, idx = torch.topk(full, k)
            x_ = torch.zeros_like(x) + mask_id
            x_[mask_index] = x0.clone()
            rows = torch.arange(x.size(0)).unsqueeze(1).expand_as(idx)
            x[rows, idx] = x_[rows, idx]
    return _cut(x[0, len(prompt):].tolist(), stops, max_new_tokens)


def dream_fast_dllm(model, prompt, *, mask_id, gen_length, block_length, threshold, dual,
                    temperature=0.0, top_p=None, stops=(), limit=None):
    n = len(prompt)
    x = torch.tensor([list(prompt) + [mask_id] * gen_length])
    for b in range(gen_length // block_length):
        s, e = n + b * block_length, n + (b + 1) * block_length
        cache = RefCache()
        logits = _shift(_run(model, x, 0, cache))
        _, x0 = dream_sample(logits[0], temperature, top_p)
        x[:, s] = x0[s]
        cache.how = ("dual", s, e) if dual else ("prefix", s)
        while True:
            view = x[:, s:e] if dual else x[:, s:]
            mask_index = view == mask_id
            logits = _shift(_run(model, view.clone(), s, cache))
            conf, x0 = dream_sample(logits[mask_index], temperature, top_p)
            x_ = torch.zeros_like(view) + mask_id
            full = torch.full_like(view, -torch.inf, dtype=logits.dtype)
            x_[mask_index] = x0.clone()
            full[mask_index] = conf
            full[:, block_length:] = -torch.inf
            k = int((x[:, s:e] == mask_id).sum())
            sel_conf, sel = torch.topk(full, k)
            transfer = torch.zeros_like(x_, dtype=torch.bool)
            transfer[0, sel[0]] = True
            for j in range(1, k):
                if sel_conf[0, j] < threshold:
                    transfer[0, sel[0, j]] = False
            view[transfer] = x_[transfer]
            if int((x[:, s:e] == mask_id).sum()) == 0:
                break
    return _cut(x[0, n:].tolist(), stops, limit or gen_length)


def _gumbel(logits, temperature):
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand_like(logits, dtype=torch.float64)
    return logits.exp() / (-torch.log(noise)) ** temperature


def _transfer(logits, temperature, mask_index, x, k, threshold, random=False):
    """LLaDA's generate (k given) and Fast-dLLM v1's get_transfer_index (threshold given),
    low_confidence remasking; the confidence's softmax in the logits' dtype as ML-GSAI's
    generate.py, in float64 as Fast-dLLM v1's."""
    x0 = torch.argmax(_gumbel(logits, temperature), dim=-1)
    if random:  # remasking='random': a uniform confidence per position
        x0_p = torch.rand(x0.shape)
    else:
        p = F.softmax(logits if threshold is None else logits.to(torch.float64), dim=-1)
        x0_p = torch.gather(p, -1, x0.unsqueeze(-1)).squeeze(-1)
    x0 = torch.where(mask_index, x0, x)
    conf = torch.where(mask_index, x0_p, -torch.inf)
    if threshold is not None:
        k = int(mask_index.sum())
    _, idx = torch.topk(conf[0], k=k)
    transfer = torch.zeros_like(x0, dtype=torch.bool)
    transfer[0, idx] = True
    if threshold is not None:
        for j in range(1, k):
            if conf[0, idx[j]] < threshold:
                transfer[0, idx[j]] = False
    return x0, transfer


def _schedule(count, steps):
    base, extra = divmod(count, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def _guided(model, x, prompt_index, mask_id, cfg_scale):
    """LLaDA's classifier-free guidance: the batch of x and x with its prompt masked."""
    un_x = x.clone()
    un_x[prompt_index] = mask_id
    logits, un_logits = torch.chunk(_run(model, torch.cat([x, un_x], dim=0)), 2, dim=0)
    return un_logits + (cfg_scale + 1) * (logits - un_logits)


def llada_generate(model, prompt, *, mask_id, gen_length, block_length, steps, temperature=0.0,
                   stops=(), limit=None, remasking="low_confidence", cfg_scale=0.0):
    n = len(prompt)
    x = torch.tensor([list(prompt) + [mask_id] * gen_length])
    prompt_index = x != mask_id
    blocks = gen_length // block_length
    steps //= blocks
    for b in range(blocks):
        s, e = n + b * block_length, n + (b + 1) * block_length
        sched = _schedule(int((x[:, s:e] == mask_id).sum()), steps)
        for i in range(steps):
            mask_index = x == mask_id
            mask_index[:, e:] = False
            logits = _guided(model, x, prompt_index, mask_id, cfg_scale) if cfg_scale > 0 else _run(model, x)
            x0, transfer = _transfer(logits, temperature, mask_index, x, sched[i], None,
                                     random=remasking == "random")
            x[transfer] = x0[transfer]
    return _cut(x[0, n:].tolist(), stops, limit or gen_length)


def llada_fast_dllm(model, prompt, *, mask_id, gen_length, block_length, threshold, dual,
                    temperature=0.0, stops=(), limit=None):
    n = len(prompt)
    x = torch.tensor([list(prompt) + [mask_id] * gen_length])
    for b in range(gen_length // block_length):
        s, e = n + b * block_length, n + (b + 1) * block_length
        cache = RefCache()
        logits = _run(model, x, 0, cache)
        mask_index = x == mask_id
        mask_index[:, e:] = False
        x0, transfer = _transfer(logits, temperature, mask_index, x, None, threshold)
        x[transfer] = x0[transfer]
        cache.how = ("dual", s, e) if dual else ("prefix", s)
        while int((x[:, s:e] == mask_id).sum()):
            view = x[:, s:e] if dual else x[:, s:]
            mask_index = view == mask_id
            mask_index[:, block_length:] = False
            logits = _run(model, view.clone(), s, cache)
            if not dual:
                _gumbel(logits, temperature)  # the prefix-cache reference draws one noise more
            x0, transfer = _transfer(logits, temperature, mask_index, view, None, threshold)
            view[transfer] = x0[transfer]
    return _cut(x[0, n:].tolist(), stops, limit or gen_length)
