"""Evaluation across a batch: the verdict cache, evaluate-only runs, the docker hand-off.

A verdict is reused when the patch, the environment, the test command and the instance's
tests are all the same as when it was made (`cache_key`); changing any of them (a rebuilt
environment, `--python`, `--test-cmd`) evaluates again. `clover swebench evaluate` grades an
existing predictions file without running the agent. `--evaluate docker` hands the predictions
to the official harness (`python -m swebench.harness.run_evaluation`), which needs docker.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from clover_cli.modes.swebench.environments import EnvError
from clover_cli.modes.swebench.evaluate import EvalOptions, evaluate_prediction, prepare
from clover_cli.modes.swebench.instances import Instance

EVAL_MODES = ("local", "docker", "none")


def cache_key(patch: str, env_key: str, command: str, inst: Instance) -> str:
    """What a verdict depends on, hashed."""
    parts = [patch, env_key, command, inst.base_commit, inst.test_patch,
             json.dumps([inst.fail_to_pass, inst.pass_to_pass])]
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:24]


def cached_evaluation(previous: dict | None, clone: Path, inst: Instance, patch: str, dest: Path,
                      opts: EvalOptions, redo: bool = False) -> dict:
    """The evaluation entry: the previous one when its cache_key still matches, else a new one."""
    if not patch.strip() or not inst.fail_to_pass:
        return evaluate_prediction(clone, inst, patch, dest, opts)
    try:
        info = prepare(inst, opts, clone)
    except EnvError as exc:
        return {"verdict": "error", "resolved": False, "patch_applied": False,
                "reason": str(exc), "error": str(exc)}
    key = cache_key(patch, info[1].key, info[2], inst)
    if not redo and isinstance(previous, dict) and previous.get("cache_key") == key:
        return {**previous, "cached": True}
    entry = evaluate_prediction(clone, inst, patch, dest, opts, env_info=info)
    entry["cache_key"] = key
    return entry


def verdict_of(entry: dict) -> str:
    """resolved / unresolved / error for a report entry (older entries had no verdict)."""
    ev = entry.get("evaluation")
    if not isinstance(ev, dict):
        return "error" if entry.get("status") == "error" else "-"
    if ev.get("verdict"):
        return ev["verdict"]
    return "resolved" if ev.get("resolved") else ("error" if ev.get("error") else "unresolved")


def summary_table(instances: dict[str, dict], elapsed: float) -> str:
    """One line per instance (verdict, seconds, reason) and the totals, for stderr."""
    rows = []
    for key, e in instances.items():
        ev = e.get("evaluation") if isinstance(e.get("evaluation"), dict) else None
        reason = (ev.get("reason") or "") if ev else e.get("error", "")
        if ev and ev.get("cached"):
            reason += " (cached verdict)"
        rows.append((key, verdict_of(e), reason, ev.get("seconds") if ev else None))
    width = max([len(r[0]) for r in rows] + [8])
    lines = [f"{'instance':<{width}}  {'verdict':<10}  {'secs':>7}  reason"]
    for key, verdict, reason, secs in rows:
        s = f"{secs:7.1f}" if isinstance(secs, (int, float)) else f"{'-':>7}"
        lines.append(f"{key:<{width}}  {verdict:<10}  {s}  {(reason or '')[:120]}")
    counts = {v: sum(r[1] == v for r in rows) for v in ("resolved", "unresolved", "error")}
    lines.append(f"resolved {counts['resolved']}, unresolved {counts['unresolved']}, "
                 f"error {counts['error']} of {len(rows)}; total time {elapsed:.1f}s")
    return "\n".join(lines)


def docker_problem() -> str | None:
    """Why the official docker harness cannot run here, or None."""
    from clover_cli.modes.swebench import official

    if not official.available():
        return "--evaluate docker needs the swebench package (pip install 'clover-cli[swebench]')"
    exe = shutil.which("docker")
    if exe is None:
        return "--evaluate docker needs docker, which is not on PATH"
    try:
        proc = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"--evaluate docker: docker does not answer ({exc})"
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()
        return "--evaluate docker: the docker daemon is not reachable" + (
            f" ({last[-1][:160]})" if last else "")
    return None


def docker_command(predictions: Path, dataset: str, run_id: str, workers: int = 1,
                   instance_ids: list[str] | None = None, split: str = "test") -> list[str]:
    """The official harness's command line for a predictions file."""
    argv = [sys.executable, "-m", "swebench.harness.run_evaluation",
            "--predictions_path", str(predictions), "--dataset_name", dataset, "--split", split,
            "--run_id", run_id, "--max_workers", str(workers)]
    if instance_ids:
        argv += ["--instance_ids", *instance_ids]
    return argv


def run_docker(predictions: Path, dataset: str, workers: int, instance_ids: list[str] | None,
               split: str = "test", stream: TextIO | None = None) -> int:
    """Run the official harness (its output goes to our stderr); its exit code."""
    problem = docker_problem()
    if problem:
        raise EnvError(problem)
    run_id = "clover-" + time.strftime("%Y%m%d-%H%M%S")
    argv = docker_command(predictions, dataset, run_id, workers, instance_ids, split)
    out = stream if stream is not None else sys.stderr
    out.write("running the official harness: " + " ".join(argv) + "\n")
    out.flush()
    return subprocess.run(argv, stdout=sys.stderr, stdin=subprocess.DEVNULL).returncode
