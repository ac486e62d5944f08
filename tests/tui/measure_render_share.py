"""Measure the share of decode time the TUI spends rendering (a script, not a test).

    .venv/bin/python tests/tui/measure_render_share.py [--model SPEC] [--turns 3]

Runs the same prompt through the agent headless (no UI) and through the real `clover` in a tmux
terminal (80x24), interleaved, with the live denoise view off and on. The TUI records, per turn,
the CPU time of its UI thread (time.thread_time() in the event-loop thread: message handling,
Markdown parsing, layout, compositing, and building the terminal output) and the turn's wall time
and the CPU time of the whole process (CLOVER_TUI_PERF). Reported: UI CPU / turn wall time,
UI CPU / process CPU (robust to other load on the machine), tokens/s in the TUI vs headless.
Finally a long Markdown answer streamed by the replay backend at a fixed block rate gives the
per-block rendering cost apart from the fixed cost of starting a turn.
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

from clover_cli.engine.loader import bundled_tiny_dir

PROMPT = "where is greet defined?"


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
    return root


def default_model(tmp: Path) -> str:
    bundled = bundled_tiny_dir()
    if any(bundled.glob("*.safetensors")):
        return "tiny"
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import build_tiny_checkpoint

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
        while "Type a request" not in (shown := screen()) or "(loading…)" in shown:  # model ready
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


ANSWER = ("Here is what I found in `greet.py`:\n\n" + "\n\n".join(
    f"{n}. The function **greet{n}** builds a greeting and returns it; callers pass a name.\n\n"
    f"```python\ndef greet{n}(name):\n    return 'hello ' + name\n```\n\n- checked\n- tested"
    for n in range(1, 25)))


def replay_stream(root: Path, blocks_per_second: float) -> dict:
    """Per-block cost: a long Markdown answer streamed by the replay backend at a fixed rate of
    128-character blocks, in the app run headless (everything but the terminal write)."""
    import asyncio

    from clover_cli.tui.app import CloverApp
    from clover_cli.tui.bridge import SessionOptions

    script = root.parent / "long.json"
    script.write_text(json.dumps({"completions": [ANSWER] * 3}))
    app = CloverApp(SessionOptions(model=f"replay:{script}", root=root, approval="read-only",
                                   backend_options={"chunk_chars": 128, "delay": 1 / blocks_per_second}))
    records = []

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            while app.chat.agent is None or app.chat.busy:
                await pilot.pause(0.1)
            for _ in range(3):
                app.chat.send(PROMPT)
                while app.chat.busy or app.chat.transcript.dirty:
                    await asyncio.sleep(0.25)
                records.append(dict(app.chat.last_perf))

    asyncio.run(run())
    return {"ui_share": statistics.median(r["ui_share"] for r in records),
            "blocks": len(ANSWER) / 128, "wall_s": statistics.median(r["wall_s"] for r in records)}


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
    for bps in (5.0, 20.0):
        r = replay_stream(root, bps)
        print(f"replay, {r['blocks']:.0f} blocks of 128 chars at {bps:g} blocks/s ({r['wall_s']:.1f} s/turn, "
              f"headless app): UI CPU / turn wall {r['ui_share']:.1%}")


if __name__ == "__main__":
    main()
