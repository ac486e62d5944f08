#!/usr/bin/env python
"""Build a random block-diffusion checkpoint for benchmarks (`clover bench --session`).

    .venv/bin/python scripts/build_bench_checkpoint.py OUT_DIR [--shape 79m|sdar-1.7b]
                     [--dtype float32|bfloat16] [--seed 0]

Qwen3-shaped, the bundled tokenizer, block size 32, 16K positions, output logits scaled by 12 so
confidences are peaked as in a trained model (tests/tiny_checkpoints.py, BENCH_SHAPES). Seeded:
the same arguments give the same weights. Prints the parameter count.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import BENCH_SHAPES, build_bench_checkpoint

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shape", choices=sorted(BENCH_SHAPES), default="79m")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    path = build_bench_checkpoint(args.out, args.shape, dtype=args.dtype, seed=args.seed)
    from safetensors import safe_open

    params = 0
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            params += sum(_numel(st.get_slice(k).get_shape()) for k in st.keys())  # tied: stored once
    print(f"{path}: {args.shape}, {params:,} parameters, {args.dtype}, "
          f"built in {time.perf_counter() - t0:.1f} s")
    return 0


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


if __name__ == "__main__":
    sys.exit(main())
