"""Measure the share of decode time the TUI spends rendering (a script, not a test).

    .venv/bin/python tests/tui/measure_render_share.py [--model SPEC] [--turns 3]

Runs the same prompt through the agent headless (no UI) and through the real `clover` in a tmux
terminal (80x24), interleaved, with the live denoise view off and on. The TUI records, per turn,
the CPU time of its UI thread (time.thread_time() in the event-loop thread: message handling,
Markdown parsing, layout, compositing, and building the terminal output) and the turn's wall time
and the CPU time of the whole process (CLOVER_TUI_PERF). Reported: UI CPU / turn wall time,
UI CPU / process CPU (robust to other load on the machine), tokens/s in the TUI vs headless.
Without --model it uses the bundled tiny model when its weights exist, else a tiny random
checkpoint built in a temp dir.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import clover_cli

PROMPT = "where is greet defined?"


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
    return root


def default_model(tmp: Path) -> str:
    bundled = Path(clover_cli.__file__).parent / "bundled" / "tiny"
    if any(bundled.glob("*.safetensors")):
        return "tiny"
    from clover_cli.engine.tiny import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp / "ckpt", "clover", block_size=32, logit_scale=12.0)
    cfg = json.loads((path / "config.json").read_text())
    cfg["max_position_embeddings"] = 16384
    (path / "config.json").write_text(json.dumps(cfg))
    return str(path)


def headless_turn(spec: str, root: Path) -> dict:
    """One turn without any UI; the events are consumed and dropped."""
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.backends import make_backend
    from clover_cli.agent.events import TurnFinished

    agent = Agent(make_backend(spec), AgentConfig(root=root, approval="read-only", save_session=False))
    start = time.perf_counter()
    stats: dict = {}
    for ev in agent.run_turn(PROMPT):
        if isinstance(ev, TurnFinished):
            stats = dict(ev.stats)
    return {"wall_s": time.perf_counter() - start, "tokens_per_second": stats.get("tokens_per_second", 0.0),
            "tokens": stats.get("generated_tokens", 0)}


def tui_turns(spec: str, root: Path, perf: Path, turns: int, denoise: bool) -> list[dict]:
    """`turns` turns in the real clover in tmux; returns the TUI's per-turn records."""
    session = f"clover-perf-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", session]  # a private tmux server per run
    clover = Path(sys.executable).parent / "clover"
    perf.unlink(missing_ok=True)
    cmd = (f"cd {root} && env CLOVER_TUI_PERF={perf} {clover} --model {spec} --root {root} "
           f"--approval read-only; sleep 5")
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd], check=True)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                              text=True).stdout

    def keys(*k: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", session, *k], check=True)

    try:
        while "Type a request" not in screen():
            time.sleep(0.5)
        if denoise:
            keys("/denoise", "Enter")
        for n in range(1, turns + 1):
            keys("/clear", "Enter")
            time.sleep(1.0)
            keys(PROMPT, "Enter")
            while not perf.exists() or len(perf.read_text().splitlines()) < n:
                time.sleep(0.5)
        return [json.loads(line) for line in perf.read_text().splitlines()]
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--turns", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="clover-perf-"))
    spec = args.model or default_model(tmp)
    root = make_repo(tmp / "repo")
    rows: dict[str, list[dict]] = {"headless": [], "tui": [], "tui+denoise": []}
    for _ in range(args.turns):  # interleaved so machine load drifts affect all alike
        rows["headless"].append(headless_turn(spec, root))
        rows["tui"] += tui_turns(spec, root, tmp / "perf.jsonl", 1, denoise=False)
        rows["tui+denoise"] += tui_turns(spec, root, tmp / "perf.jsonl", 1, denoise=True)
    print(f"model {spec}, prompt {PROMPT!r}, {args.turns} turns each")
    base = statistics.median(r["tokens_per_second"] for r in rows["headless"])
    for name, recs in rows.items():
        tps = statistics.median(r["tokens_per_second"] for r in recs)
        line = (f"{name:12s} tokens/turn {statistics.median(r['tokens'] for r in recs):4.0f}  "
                f"tok/s {tps:6.2f} ({tps / base - 1:+.1%} vs headless)")
        if "ui_cpu_s" in recs[0]:
            wall = statistics.median(r["ui_cpu_s"] / r["wall_s"] for r in recs)
            cpu = statistics.median(r["ui_cpu_s"] / r["process_cpu_s"] for r in recs)
            line += f"  UI CPU / turn wall {wall:.1%}  UI CPU / process CPU {cpu:.1%}"
        print(line)


if __name__ == "__main__":
    main()
