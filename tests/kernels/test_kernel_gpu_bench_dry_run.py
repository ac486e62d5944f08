"""scripts/gpu_bench.py --dry-run works on this CPU (tiny shapes through the Triton interpreter)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_bench_dry_run_reports_every_op_in_agreement(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_bench.py"), "--dry-run",
                           "--json", str(out)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["dry_run"] is True and doc["device"].startswith("cpu")
    impls = {(r["op"], r["impl"]) for r in doc["rows"]}
    assert {("confidence", "triton"), ("block_attention", "triton"),
            ("gated_delta", "triton-ieee-c16")} <= impls
    assert all(r["ok"] is not False for r in doc["rows"])
    assert all(r["ms"] is None or r["ms"] > 0 for r in doc["rows"])
    assert "block_attention" in proc.stdout and "triton" in proc.stdout
    model = doc["model"]  # the SDAR-shaped section, shrunk: loaded through the engine's loader
    assert model["attn_implementation"] == "sdpa" and model["layers"] == 2
    assert all(model[f"t_fwd_{t}_ms"] > 0 for t in (1, 32, 64))
    assert model["decode_tokens"] == 32 and model["decode_tokens_per_second"] > 0
    session = doc["session"]  # the session replay, shrunk: 3 steps cold and warm on the CPU
    assert session["shape"] == "dry-run" and session["prefix_reuse"] is True
    assert [r["step"] for r in session["steps"]] == [1, 2, 3] and session["identical_ids"] is True
    assert all(r["warm"]["reused_tokens"] > 0 for r in session["steps"][1:])
    assert session["targets"]["prefill_bounded"]["ok"] is True
