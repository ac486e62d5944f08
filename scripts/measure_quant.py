#!/usr/bin/env python
"""Measure --quantize (docs/engine.md, "Quantized weights"): bytes, RSS, CPU forward time, ids.

    .venv/bin/python scripts/build_bench_checkpoint.py /tmp/bench79m
    .venv/bin/python scripts/measure_quant.py /tmp/bench79m [--reps 20] [--threads 2] [--tokens 64]
    .venv/bin/python scripts/measure_quant.py /tmp/bench79m --layers   # which layers stay full

Default report, one run:
- weights: bytes of the loaded model's parameters and buffers (engine/quantize.py weight_bytes)
  in float32, bfloat16, int8 and int4 (quantized in bfloat16 compute), each against bfloat16;
  the process's RSS (and peak) after loading each format alone (float32 compute, a fresh
  interpreter per format) and one 32-token forward;
- forward time on the CPU after a 256-token prefix in the KV cache, at 1 query (AR-like) and 32
  queries (a block), float32 vs int8 vs int4 (float32 compute), interleaved: each repetition times
  every format in turn, medians reported;
- ids: `clover generate`'s decode (the Engine, its defaults: threshold 0.95) of int8 and int4 vs
  unquantized on four prompts, the share of identical ids (position by position) and the first
  position that differs.
--layers: max |Δlogit| and top-1 agreement against float32, teacher-forced on 64 tokens, with the
output head kept vs quantized (the 79M checkpoint, random; the bundled tiny, trained) and the GDN gates kept vs quantized (a tiny
GDN hybrid built here).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROMPTS = ["def fibonacci(n):", "Write a function that reverses a list.", "import os\nimport sys\n",
           "class Stack:\n    def push(self, x):"]


def _load(path: str, fmt: str, dtype: str = "float32"):
    from clover_cli.engine.loader import load_model

    return load_model(path, device="cpu", dtype=dtype, quantize=fmt)


def weights(path: str) -> dict:
    from clover_cli.engine.quantize import weight_bytes

    out = {}
    for label, fmt, dtype in (("float32", "none", "float32"), ("bfloat16", "none", "bfloat16"),
                              ("int8", "int8", "bfloat16"), ("int4", "int4", "bfloat16")):
        out[label] = weight_bytes(_load(path, fmt, dtype).model)
    return {k: {"bytes": v, "vs_bfloat16": round(v / out["bfloat16"], 3)} for k, v in out.items()}


RSS_CODE = """
import resource, sys, torch
from clover_cli.engine.loader import load_model
lm = load_model(sys.argv[1], device="cpu", dtype="float32", quantize=sys.argv[2])
with torch.no_grad():  # every weight touched (an unquantized load leaves them mapped, unread)
    lm.model(torch.arange(10, 42)[None])
rss = int(open("/proc/self/statm").read().split()[1]) * 4096
print(rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def rss(path: str) -> dict:
    out = {}
    for fmt in ("none", "int8", "int4"):
        done = subprocess.run([sys.executable, "-c", RSS_CODE, path, fmt], capture_output=True, text=True,
                              check=True)
        now, peak = (int(x) for x in done.stdout.split())
        out[fmt] = {"rss_mib": round(now / 2**20), "peak_rss_mib": round(peak / 2**20)}
    return out


def forward_times(path: str, reps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    models = {fmt: _load(path, fmt).model for fmt in ("none", "int8", "int4")}
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(10, 4000, (1, 256), generator=g)
    out = {}
    for queries in (1, 32):
        ids = torch.randint(10, 4000, (1, queries), generator=g)
        pos = torch.arange(256, 256 + queries)[None]
        caches = {}
        with torch.no_grad():
            for fmt, model in models.items():
                caches[fmt] = model.make_cache()
                model(prefix, cache=caches[fmt])
            times = {fmt: [] for fmt in models}
            for _ in range(reps):
                for fmt, model in models.items():  # interleaved: the machine's load hits all alike
                    t0 = time.perf_counter()
                    model(ids, position_ids=pos, cache=caches[fmt])
                    times[fmt].append(time.perf_counter() - t0)
                    for layer in caches[fmt].layers:
                        layer.truncate(256)
        base = statistics.median(times["none"])
        out[f"{queries}q"] = {("float32" if f == "none" else f): {
            "median_ms": round(statistics.median(t) * 1e3, 2), "vs_float32": round(statistics.median(t) / base, 2)}
            for f, t in times.items()}
    return out


def ids(path: str, tokens: int) -> dict:
    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine

    runs = {}
    for fmt in ("none", "int8", "int4"):
        lm = _load(path, fmt)
        runs[fmt] = [Engine(lm, cache_mb=0).generate(lm.encode(lm.render_chat([{"role": "user", "content": p}])),
                                                     GenerationConfig(max_new_tokens=tokens, threshold=0.95))
                     for p in PROMPTS]
    out = {}
    for fmt in ("int8", "int4"):
        same = total = 0
        first = []
        for a, b in zip(runs["none"], runs[fmt]):
            a, b = list(getattr(a, "token_ids", a)), list(getattr(b, "token_ids", b))
            n = max(len(a), len(b))
            same += sum(1 for x, y in zip(a, b) if x == y)
            total += n
            first.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))
                              if len(a) != len(b) else None))
        out[fmt] = {"identical_share": round(same / total, 3), "first_difference": first, "tokens": total}
    return out


def layers(path: str, tmp: Path) -> dict:
    """max |Δlogit| / top-1 agreement vs float32 for the keep choices (engine/quantize.py)."""
    import torch

    from clover_cli.engine import quantize as q
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import build_tiny_checkpoint

    hybrid = build_tiny_checkpoint(tmp / "hybrid", "hybrid", block_size=8, logit_scale=12.0)
    from clover_cli.engine.loader import bundled_tiny_dir

    heads = {"head kept (default)": (q.KEEP_NAMES, False), "head quantized": (q.KEEP_NAMES - {"lm_head"}, True)}
    choices = {"79m": (path, heads), "tiny (trained)": (str(bundled_tiny_dir()), heads),
               "hybrid": (str(hybrid), {"gates kept (default)": (q.KEEP_NAMES, False),
                                        "gates quantized": (frozenset({"lm_head"}), False)})}
    out = {}
    keep, names0 = q.keeps_full_precision, q.KEEP_NAMES
    for name, (ckpt, cases) in choices.items():
        base = _load(ckpt, "none")
        x = torch.tensor([base.encode("\n".join(PROMPTS * 4))[:64]])  # every checkpoint here: the bundled tokenizer
        with torch.no_grad():
            ref = base.model(x).logits.float()
        for fmt in ("int8", "int4"):
            for label, (names, head) in cases.items():
                q.KEEP_NAMES = names
                q.keeps_full_precision = (lambda n, m, h, _head=head: (m is h and not _head)
                                          or not q.KEEP_NAMES.isdisjoint(n.split(".")))
                lm = _load(ckpt, "none")
                q.quantize_model(lm.model, fmt)
                q.KEEP_NAMES, q.keeps_full_precision = names0, keep
                with torch.no_grad():
                    got = lm.model(x).logits.float()
                out[f"{name} {fmt} {label}"] = {
                    "max_abs_dlogit": round((got - ref).abs().max().item(), 4),
                    "top1_agree": round((got.argmax(-1) == ref.argmax(-1)).float().mean().item(), 3)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--layers", action="store_true")
    ap.add_argument("--parts", default="weights,rss,forward,ids", help="which of the default report")
    args = ap.parse_args()
    if args.layers:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps({"layers": layers(args.checkpoint, Path(tmp))}, indent=1))
        return 0
    parts = {"weights": lambda: weights(args.checkpoint), "rss": lambda: rss(args.checkpoint),
             "forward": lambda: forward_times(args.checkpoint, args.reps, args.threads),
             "ids": lambda: ids(args.checkpoint, args.tokens)}
    report = {name: parts[name]() for name in args.parts.split(",")}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
