#!/usr/bin/env python
"""Measure: a second start of `--model smollm2` to its first token, against the bundled `tiny`'s.

`smollm2` is a GGUF that transformers converts at every load (25-75 s); engine/gguf_cache.py
converts it once into Clover's cache and later starts load the converted directory. The target
(docs/engine.md, "Loading"): a warm smollm2 start <= 1.5 x a `tiny` start (`import torch` + load
of the bundled model + its first token). Each start is a fresh interpreter running

    python -m clover_cli.cli generate --model MODEL --prompt "Say hi." --max-new-tokens 1

timed from spawn to exit (the one token is the first; exit adds the same small teardown to both).
First one cold smollm2 start (an empty XDG_CACHE_HOME: it converts), then --runs rounds of
`import torch`, tiny and warm smollm2, interleaved so machine load hits them alike; medians.

Usage: .venv/bin/python scripts/measure_smollm2_start.py [--runs 5] [--json]
A measurement to run by hand, not a test (timings depend on the machine and its load).
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


def timed(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    py = sys.executable

    def start(model: str) -> list[str]:
        return [py, "-m", "clover_cli.cli", "generate", "--model", model, "--prompt", "Say hi.",
                "--max-new-tokens", "1"]

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_STATE_HOME": os.path.join(tmp, "state"),
               "XDG_CONFIG_HOME": os.path.join(tmp, "config"), "XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        subprocess.run([py, "-c", "import torch"], env=env, check=True)  # warm the page cache once
        cold = timed(start("smollm2"), env)
        rows: dict[str, list[float]] = {"torch": [], "tiny": [], "smollm2": []}
        for _ in range(opts.runs):
            rows["torch"].append(timed([py, "-c", "import torch"], env))
            rows["tiny"].append(timed(start("tiny"), env))
            rows["smollm2"].append(timed(start("smollm2"), env))
    med = {k: statistics.median(v) for k, v in rows.items()}
    ratio = med["smollm2"] / med["tiny"]
    if opts.json:
        print(json.dumps({"runs": opts.runs, "cold_smollm2_s": round(cold, 2),
                          "median_s": {k: round(v, 2) for k, v in med.items()},
                          "all_s": {k: [round(x, 2) for x in v] for k, v in rows.items()},
                          "ratio_smollm2_over_tiny": round(ratio, 2)}, indent=2))
        return
    print(f"first token, fresh interpreters, medians of {opts.runs} interleaved runs (seconds):")
    print(f"  python -c 'import torch'              {med['torch']:.2f}")
    print(f"  tiny start                            {med['tiny']:.2f}   {_runs(rows['tiny'])}")
    print(f"  smollm2 start, cache warm             {med['smollm2']:.2f}   {_runs(rows['smollm2'])}")
    print(f"  smollm2 start, cache cold (converts)  {cold:.2f}   (once)")
    print(f"  ratio smollm2 warm / tiny             {ratio:.2f}  (target <= 1.5)")


def _runs(values: list[float]) -> str:
    return "[" + " ".join(f"{v:.2f}" for v in values) + "]"


if __name__ == "__main__":
    main()
