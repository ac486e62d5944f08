#!/usr/bin/env python
"""Time CPU forwards and short decodes at 1..N torch threads, idle and beside busy loops.

    .venv/bin/python scripts/measure_threads.py [--models bench,smollm2] [--threads 1,2]
        [--busy 0,2] [--variants default,passive] [--reps 3] [--forwards 5] [--decode-tokens 16]

Models: `bench` (the 79M block-diffusion checkpoint of scripts/build_bench_checkpoint.py, built
into a temporary directory), `smollm2`, `tiny`, or any other model spec. Each (model, variant)
loads once in its own worker process (variant `passive` runs it with OMP_WAIT_POLICY=PASSIVE,
which OpenMP reads only at start-up; `interop1` calls torch.set_num_interop_threads(1)). The
settings then run interleaved: every repetition visits each busy level (that many
`python -c "while True: pass"` processes, started and killed here) and, under it, every
(worker, threads) pair, in an order that rotates between repetitions, so machine drift spreads
over all settings alike. Per setting: one warm-up forward, then `--forwards` timed forwards over a
32-token prompt (no cache), then one greedy decode of `--decode-tokens` new tokens (the engine's
decoder, no prefix reuse); before each, a 0.3 s /proc/stat sample of the cores that work outside
this script keeps busy. Prints a table of medians over the repetitions (forward ms, decode
tokens/s, other work); --json prints the raw samples too. docs/engine.md, "CPU threads", holds
the figures and the policy they chose.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {"default": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "interop1": {}}
PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n" * 4
TAG = "@@ "  # protocol lines between the coordinator and its workers (the rest is log)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bench,smollm2")
    ap.add_argument("--threads", default=",".join(str(n) for n in range(1, len(os.sched_getaffinity(0)) + 1)))
    ap.add_argument("--busy", default="0,2", help="busy-loop counts to run beside, e.g. 0,1,2")
    ap.add_argument("--variants", default="default", help=f"among {','.join(VARIANTS)}")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--forwards", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("SPEC", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker, forwards=args.forwards, decode_tokens=args.decode_tokens)
    threads = [int(t) for t in args.threads.split(",")]
    busy = [int(b) for b in args.busy.split(",")]
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    with tempfile.TemporaryDirectory(prefix="clover-threads-") as tmp:
        specs = [_spec(m, tmp) for m in args.models.split(",")]
        workers = [_Worker(spec, name, v, args) for spec, name in specs for v in variants]
        try:
            samples = _run(workers, threads, busy, args.reps)
        finally:
            for w in workers:
                w.close()
    _print_table(samples)
    if args.json:
        print(json.dumps(samples))
    return 0


def _spec(model: str, tmp: str) -> tuple[str, str]:
    """(spec, label): `bench` is built into `tmp` first."""
    if model != "bench":
        return model, model
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import build_bench_checkpoint

    return str(build_bench_checkpoint(os.path.join(tmp, "bench79m"), "79m")), "bench-79m"


class _Worker:
    """One model loaded once in its own process, answering `THREADS` lines with one JSON sample."""

    def __init__(self, spec: str, label: str, variant: str, args):
        self.label, self.variant = label, variant
        env = {**os.environ, **VARIANTS[variant]}
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", spec, variant,
               "--forwards", str(args.forwards), "--decode-tokens", str(args.decode_tokens)]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        info = self._answer()
        print(f"# {label} [{variant}]: {info['params'] / 1e6:.0f}M parameters, loaded in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    def measure(self, threads: int) -> dict:
        """One sample at `threads` intra-op threads."""
        self.proc.stdin.write(f"{threads}\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
        raise RuntimeError(f"worker for {self.label} exited with {self.proc.wait()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def _run(workers: list[_Worker], threads: list[int], busy: list[int], reps: int) -> list[dict]:
    from clover_cli.engine.threads import busy_cores

    samples = []
    pairs = [(w, t) for w in workers for t in threads]
    for rep in range(reps):
        for b in busy[rep % len(busy):] + busy[:rep % len(busy)]:
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(b)]
            try:
                time.sleep(0.5 if b else 0)  # the loops are running before the first sample
                shift = rep % len(pairs)
                for w, t in pairs[shift:] + pairs[:shift]:
                    other = (busy_cores(0.3) or 0.0) - b  # what the rest of the machine is doing
                    s = w.measure(t)
                    samples.append({"model": w.label, "variant": w.variant, "busy": b, "threads": t,
                                    "rep": rep, "other_cores": other, **s})
                    print(f"# rep {rep} busy {b} {w.label} [{w.variant}] {t} threads: "
                          f"(others {other:.1f} cores): forward {s['forward_ms']:.1f} ms, "
                          f"decode {s['decode_tps']:.2f} tok/s",
                          file=sys.stderr, flush=True)
            finally:
                for p in loops:
                    p.kill()
                    p.wait()
    return samples


def _print_table(samples: list[dict]) -> None:
    keys = sorted({(s["model"], s["variant"], s["busy"], s["threads"]) for s in samples})
    print("| model | variant | busy loops | threads | forward ms | decode tok/s | other work, cores | n |")
    print("|---|---|---|---|---|---|---|---|")
    for key in keys:
        group = [s for s in samples if (s["model"], s["variant"], s["busy"], s["threads"]) == key]
        fwd = statistics.median(s["forward_ms"] for s in group)
        tps = statistics.median(s["decode_tps"] for s in group)
        other = statistics.median(s["other_cores"] for s in group)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {fwd:.1f} | {tps:.2f} | {other:.1f} "
              f"| {len(group)} |")


def worker(spec: str, variant: str, *, forwards: int, decode_tokens: int) -> int:
    """Load `spec`, then answer each stdin line (a thread count) with one tagged JSON sample."""
    import torch

    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model

    if variant == "interop1":
        torch.set_num_interop_threads(1)
    lm = load_model(spec, offline=True)
    engine = Engine(lm, cache_mb=0)
    ids = lm.encode_raw(PROMPT)[:32]
    x = torch.tensor([ids])
    cfg = GenerationConfig(max_new_tokens=decode_tokens, temperature=0.0)
    _say({"params": sum(p.numel() for p in lm.model.parameters())})
    for line in sys.stdin:
        torch.set_num_threads(int(line))
        with torch.inference_mode():
            lm.model(input_ids=x)  # warm-up
            times = []
            for _ in range(forwards):
                t0 = time.perf_counter()
                lm.model(input_ids=x)
                times.append(time.perf_counter() - t0)
        stats = engine.generate(ids, cfg, reuse=False).stats
        _say({"forward_ms": 1000 * statistics.median(times), "decode_tps": stats.tokens_per_second,
              "decode_tokens": stats.generated_tokens})
    return 0


def _say(obj: dict) -> None:
    print(TAG + json.dumps(obj), flush=True)


if __name__ == "__main__":
    sys.exit(main())
