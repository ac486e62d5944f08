"""The session section of scripts/gpu_bench.py (`--only session`): the recorded 20-step agent
session (clover_cli/bench/session_replay.json) replayed cold and with prefix reuse
(clover_cli/bench/session.py) on a random checkpoint built in a temporary folder, in bf16
on CUDA: per-step context, reused / prefilled tokens, prefill / decode / step seconds and CUDA
memory. Shapes: "sdar-1.7b" (SDAR-1.7B-Chat's body on the bundled tokenizer) or "79m"
(tests/tiny_checkpoints.py, BENCH_SHAPES). --dry-run: 2 layers, width 64, float32, 3 steps
on the CPU."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def bench_session(dry_run: bool, shape: str = "sdar-1.7b", steps: int | None = None,
                  decode_tokens: int = 32) -> dict:
    from clover_cli.engine.loader import bundled_tiny_dir, load_model
    from clover_cli.bench.session import load_session, replay
    from clover_cli.bench.session_report import format_report
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import build_bench_checkpoint, build_tiny_checkpoint

    device, dtype = ("cpu", "float32") if dry_run else ("cuda", "bfloat16")
    with tempfile.TemporaryDirectory(prefix="clover-session-bench-") as tmp:
        t0 = time.perf_counter()
        if dry_run:
            shape = "dry-run"
            path = build_tiny_checkpoint(Path(tmp) / "m", "clover", block_size=32, logit_scale=12.0,
                                         tokenizer_dir=bundled_tiny_dir(), max_position_embeddings=16384)
        else:
            path = build_bench_checkpoint(Path(tmp) / "m", shape, dtype=dtype)
        build_s = time.perf_counter() - t0
        lm = load_model(str(path), device=device, dtype=dtype)
    report = replay(lm, load_session(), steps=3 if dry_run and steps is None else steps,
                    decode_tokens=8 if dry_run else decode_tokens)
    print(format_report(report))
    for row in report["steps"]:  # the JSON keeps the figures, not the generated ids
        for run in ("cold", "warm"):
            row[run].pop("token_ids", None)
    report.update(shape=shape, build_seconds=round(build_s, 1))
    return report
