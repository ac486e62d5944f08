#!/usr/bin/env python
"""Benchmark: how long until `clover` can answer, against the bare cost of `import torch`.

The target (docs/tui.md, "Startup"): time to model-ready <= 1.5 x the bare `import torch`
time on the same machine. Each figure is the median of --runs fresh interpreters, run
interleaved so machine load hits both alike:

  torch        python -c "import torch"                            (the floor: every in-process model needs it)
  model-ready  make_backend(MODEL) + Agent(...)                    (what the TUI's load worker does)
  tui          headless CloverApp: prompt focused (usable) and model ready (AgentReady handled)

Usage: .venv/bin/python scripts/bench_startup.py [--model tiny] [--runs 5] [--no-tui] [--json]
This is a measurement to run by hand, not a test (timings depend on the machine and its load).
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

TORCH = "import torch"

READY = r"""
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends import make_backend
t1 = time.perf_counter()
backend = make_backend(sys.argv[1])
t2 = time.perf_counter()
Agent(backend, AgentConfig(root=Path(sys.argv[2]), approval="ask", save_session=False))
t3 = time.perf_counter()
print(f"{t1 - t0:.4f} {t2 - t1:.4f} {t3 - t2:.4f}")
"""

TUI = r"""
import asyncio, sys, time
t0 = time.perf_counter()
from pathlib import Path
from clover_cli.tui.app import CloverApp
from clover_cli.tui.bridge import SessionOptions

async def main():
    app = CloverApp(SessionOptions(model=sys.argv[1], root=Path(sys.argv[2])))
    usable = ready = None
    async with app.run_test(size=(80, 24)) as pilot:
        while ready is None and time.perf_counter() - t0 < 600:
            chat = app.chat
            if usable is None and chat.is_mounted and app.focused is chat.prompt:
                usable = time.perf_counter() - t0
            if chat.agent is not None and not chat.busy:
                ready = time.perf_counter() - t0
            await pilot.pause(0.05)
        await app.action_quit()
    print(f"{usable:.4f} {ready:.4f}")

asyncio.run(main())
"""


def timed(args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, out.strip().splitlines()[-1] if out.strip() else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-tui", action="store_true", help="skip the headless TUI measurement")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        os.mkdir(root)
        env = {**os.environ, "XDG_STATE_HOME": os.path.join(tmp, "state"),
               "XDG_CONFIG_HOME": os.path.join(tmp, "config"), "XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        subprocess.run([py, "-c", TORCH], env=env, check=True)  # warm the page cache once
        rows: dict[str, list[float]] = {"torch": [], "model_ready": [], "imports": [], "load": [],
                                        "agent": [], "tui_usable": [], "tui_ready": []}
        for _ in range(opts.runs):
            wall, _ = timed([py, "-c", TORCH], env)
            rows["torch"].append(wall)
            wall, out = timed([py, "-c", READY, opts.model, root], env)
            rows["model_ready"].append(wall)
            for key, value in zip(("imports", "load", "agent"), out.split()):
                rows[key].append(float(value))
            if not opts.no_tui:
                _, out = timed([py, "-c", TUI, opts.model, root], env)
                usable, ready = (float(v) for v in out.split())
                rows["tui_usable"].append(usable)
                rows["tui_ready"].append(ready)
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    med["ratio_model_ready_over_torch"] = med["model_ready"] / med["torch"]
    if "tui_ready" in med:
        med["ratio_tui_ready_over_torch"] = med["tui_ready"] / med["torch"]
    if opts.json:
        print(json.dumps({"model": opts.model, "runs": opts.runs, "median_s": med}, indent=2))
        return
    print(f"model {opts.model}, medians of {opts.runs} interleaved runs (seconds, fresh interpreters):")
    print(f"  python -c 'import torch'          {med['torch']:.2f}")
    print(f"  model ready (process wall)        {med['model_ready']:.2f}  "
          f"= imports {med['imports']:.2f} + load {med['load']:.2f} + agent {med['agent']:.2f} + interpreter")
    if "tui_ready" in med:
        print(f"  TUI usable (prompt focused)       {med['tui_usable']:.2f}")
        print(f"  TUI model ready                   {med['tui_ready']:.2f}")
    print(f"  ratio model-ready / import torch  {med['ratio_model_ready_over_torch']:.2f}  (target <= 1.5)")
    if "ratio_tui_ready_over_torch" in med:
        print(f"  ratio TUI ready / import torch    {med['ratio_tui_ready_over_torch']:.2f}")


if __name__ == "__main__":
    main()
