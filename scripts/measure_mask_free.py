#!/usr/bin/env python
"""Time a denoise step with and without its all-zero block-causal mask (docs/engine.md,
"Decoding rule"): one 32-token block over K cached keys, the two variants interleaved.

    .venv/bin/python scripts/measure_mask_free.py [--model SPEC] [--keys 4096 16384]
                     [--repeats 40] [--transformers]

--model: any load_model spec (default: the bundled tiny); a directory built by
scripts/build_bench_checkpoint.py is a bigger one. Our networks run the step as the decoder does:
the zero mask, or no mask with is_causal=False. --transformers loads transformers' network
instead (native=False): its forward gets the zero mask both times, and our SDPA hook skips
reading it inside a denoise step (engine/kernel_hooks.py gqa_sdpa). Threads as decoding picks
them (engine.py configure_cpu_threads). Prints the median of each and their ratio per K.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time


def _fill(lm, cache, keys: int, block: int) -> None:
    """Prefill `keys` random positions block-causally, in chunks of 1,024."""
    import torch

    from clover_cli.engine.runtime import ForwardRunner, block_causal_mask

    run = ForwardRunner(lm.model)
    dtype = next(lm.model.parameters()).dtype
    ids = torch.randint(20, 200, (keys,), generator=torch.Generator().manual_seed(0))
    for c0 in range(0, keys, 1024):
        c1 = min(keys, c0 + 1024)
        pos = torch.arange(c0, c1)
        run(ids[c0:c1], pos, cache, block_causal_mask(pos, c1, block, dtype), logits_to_keep=1)


def measure(lm, keys: int, repeats: int, block: int = 32) -> tuple[float, float]:
    """(median seconds with the mask, without it) of a one-block forward over `keys` cached keys."""
    import torch

    from clover_cli.engine.kernel_hooks import denoise_step
    from clover_cli.engine.runtime import (ForwardRunner, block_causal_mask, crop_attention,
                                           make_cache, reserve_cache)

    cache = make_cache(lm.model)
    reserve_cache(cache, keys + 2 * block)
    _fill(lm, cache, keys, block)
    run = ForwardRunner(lm.model)
    dtype = next(lm.model.parameters()).dtype
    tokens = torch.full((block,), lm.mask_token_id)
    pos = torch.arange(keys, keys + block)
    zeros = block_causal_mask(pos, keys + block, block, dtype)
    own = bool(getattr(lm.model, "mask_free_forward", False))

    def step(masked: bool) -> float:
        if own:  # our network: the mask, or none (as block_decode.py passes it)
            args, scope = ((zeros, None) if masked else (None, False)), denoise_step(block)
        else:  # transformers': the zero mask both times; the hook reads it outside a denoise step
            args, scope = (zeros, None), (contextlib.nullcontext() if masked else denoise_step(block))
        t0 = time.perf_counter()
        with scope:
            run(tokens, pos, cache, args[0], is_causal=args[1])
        seconds = time.perf_counter() - t0
        crop_attention(cache, block)
        return seconds

    for masked in (True, False):  # warm both paths
        step(masked)
    with_mask, without = [], []
    for i in range(repeats):  # interleaved, alternating which goes first
        for masked in ((True, False) if i % 2 == 0 else (False, True)):
            (with_mask if masked else without).append(step(masked))
    return statistics.median(with_mask), statistics.median(without)


def main() -> int:
    from clover_cli.engine.engine import Engine, configure_cpu_threads
    from clover_cli.engine.loader import load_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--keys", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--transformers", action="store_true", help="transformers' network (native=False)")
    args = ap.parse_args()
    lm = load_model(args.model, native=False if args.transformers else None)
    Engine(lm, cache_mb=0)  # the attention hooks a decode gets (gqa_sdpa on transformers' CPU path)
    threads = configure_cpu_threads(lm.model)
    params = sum(p.numel() for p in lm.model.parameters())
    print(f"{args.model}: {type(lm.model).__name__}, {params / 1e6:.1f}M parameters, "
          f"{next(lm.model.parameters()).dtype}, {threads} thread(s), {args.repeats} pairs")
    for keys in args.keys:
        masked, free = measure(lm, keys, args.repeats)
        print(f"{keys:6d} keys: mask {masked * 1e3:7.2f} ms, no mask {free * 1e3:7.2f} ms, "
              f"ratio {masked / free:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
