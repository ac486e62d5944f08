#!/usr/bin/env python
"""The GPU benchmark: the product path, each Triton kernel, the SDAR-shaped model and the session
replay, each section written to the output folder as it finishes (docs/kernels.md, "GPU benchmark").

On a lent GPU (after scripts/gpu_install.py):   python scripts/gpu_bench.py --out "$OUT"
On this CPU:   python scripts/gpu_bench.py --dry-run --out DIR   (tiny shapes, TRITON_INTERPRET=1)

Sections, in order, each in its own process with a time cap, under one deadline (--deadline; a
section that would start with less time left than it needs is skipped, and summary.json says so):
  generate  `clover generate --device auto --json` on an SDAR-1.7B-shaped random checkpoint:
            CUDA, bfloat16, the Triton hooks installed; forwards/s (scripts/gpu_model_bench.py)
  kernels   confidence, attention, gated_delta: Triton vs reference vs torch, with agreement
            (scripts/gpu_kernel_bench.py)
  model     t_fwd(1 / 32 / 64) and decode tokens/s on the same checkpoint (gpu_model_bench.py)
  session   the recorded 20-step agent session replayed cold and warm (gpu_session_bench.py)
Output: OUT/summary.json (rewritten after every section: plan, status, seconds, ok) and
OUT/<section>.json (written atomically; kernels.json after every op). Exits 1 when a section
failed, ran out of time or disagreed; 0 otherwise (skipped sections included).
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name: (ops, seconds needed to start, cap) on one H100, estimated from the shapes (docs/kernels.md)
SECTIONS = {"generate": ((), 60, 240), "kernels": (("confidence", "attention", "gated_delta"), 60, 200),
            "model": ((), 45, 150), "session": ((), 90, 240)}
DEADLINE, DRY_DEADLINE, DRY_CAP = 420, 900, 400
OPS = {"confidence": "kernels", "attention": "kernels", "gated_delta": "kernels"}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU, Triton interpreter")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: $OUT, else ./gpu-bench-out)")
    ap.add_argument("--deadline", type=float, default=None,
                    help=f"seconds for all sections (default {DEADLINE}; --dry-run {DRY_DEADLINE})")
    ap.add_argument("--only", default=None,
                    help="comma-separated sections or kernel ops: generate, kernels, confidence, "
                         "attention, gated_delta, model, session")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (median reported)")
    ap.add_argument("--json", type=Path, default=None, help="also write every section in one file here")
    ap.add_argument("--session-shape", choices=["sdar-1.7b", "79m"], default="sdar-1.7b",
                    help="the random checkpoint the session replay runs on")
    ap.add_argument("--session-steps", type=int, default=None,
                    help="session steps (default: the recording's 20; more cycle its tool turns)")
    ap.add_argument("--section", default=None, help=argparse.SUPPRESS)  # a child: run one section
    ap.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def write_json(path: Path, doc: dict) -> None:
    """Write atomically (a temporary file renamed over), so a killed run leaves whole files."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def plan(only: str | None) -> dict[str, list[str]]:
    """{section: kernel ops} for --only (all sections by default)."""
    if not only:
        return {name: list(ops) for name, (ops, _, _) in SECTIONS.items()}
    picked: dict[str, list[str]] = {}
    for item in (s.strip() for s in only.split(",") if s.strip()):
        if item in OPS:
            picked.setdefault("kernels", []).append(item)
        elif item in SECTIONS:
            picked[item] = list(SECTIONS[item][0])
        else:
            sys.exit(f"gpu_bench: unknown section {item!r}; one of {', '.join([*SECTIONS, *OPS])}")
    return {name: picked[name] for name in SECTIONS if name in picked}


def run_section(args: argparse.Namespace) -> int:
    """A child process: run one section and write OUT/<section>.json."""
    name, out, t0 = args.section, args.out, time.perf_counter()
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere
    sys.path.insert(0, str(HERE))

    last: dict = {}

    def save(doc: dict, complete: bool = False) -> None:
        last.update(doc)
        write_json(out / f"{name}.json", dict(doc, section=name, complete=complete,
                                              seconds=round(time.perf_counter() - t0, 2)))

    try:
        doc = section(name, args, save)
    except Exception as exc:  # noqa: BLE001 - kept in the section's file; the traceback goes to the log
        save(dict(last, error=f"{type(exc).__name__}: {exc}"[-2000:], ok=False))
        raise
    save(doc, complete=True)
    return 0


def section(name: str, args: argparse.Namespace, save) -> dict:
    """Run one section in this process; its document."""
    if name == "generate":
        from gpu_model_bench import bench_generate

        doc = bench_generate(args.work, args.dry_run, save)
    elif name == "kernels":
        if importlib.util.find_spec("triton") is None:
            doc = dict(skipped="triton is not installed", ok=None)
        else:
            from gpu_kernel_bench import run_kernels, table

            doc = run_kernels(args.dry_run, args.reps, args.only.split(","), save)
            print(table(doc["rows"]))
    elif name == "model":
        from gpu_model_bench import bench_model

        doc = bench_model(args.dry_run, args.reps or (1 if args.dry_run else 20), work=args.work)
        doc["ok"] = True
    else:
        from gpu_session_bench import bench_session

        doc = bench_session(args.dry_run, args.session_shape, args.session_steps)
        doc["ok"] = None  # a measurement: bf16 rounding may part cold and warm ids (identical_ids)
    return doc


def child_cmd(args: argparse.Namespace, name: str, ops: list[str], work: Path) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--section", name, "--out", str(args.out),
           "--work", str(work), "--session-shape", args.session_shape]
    cmd += ["--only", ",".join(ops)] if ops else []
    cmd += ["--dry-run"] if args.dry_run else []
    cmd += ["--reps", str(args.reps)] if args.reps else []
    cmd += ["--session-steps", str(args.session_steps)] if args.session_steps else []
    return cmd


def run_child(cmd: list[str], cap: float) -> tuple[str, int | None]:
    """Run a section's process for at most `cap` seconds: (status, exit code)."""
    proc = subprocess.Popen(cmd, process_group=0)  # not a new session: ends with the command
    try:
        rc = proc.wait(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the section and any `clover generate` it started
        proc.wait()
        return "timed_out", None
    return ("done" if rc == 0 else "failed"), rc


def environment() -> dict:
    """Versions in use, read without importing torch (the sections' processes own the GPU)."""
    versions = {}
    for name in ("torch", "triton", "transformers", "tokenizers", "safetensors", "numpy", "clover-cli"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    spec = importlib.util.find_spec("clover_cli")
    return dict(python=sys.version.split()[0], executable=sys.executable, versions=versions,
                clover_cli=spec.origin if spec else None)


def orchestrate(args: argparse.Namespace) -> int:
    """Run the planned sections under the deadline, keeping summary.json current."""
    deadline = args.deadline or (DRY_DEADLINE if args.dry_run else DEADLINE)
    sections = plan(args.only)
    summary = dict(dry_run=args.dry_run, deadline_seconds=deadline, plan=list(sections),
                   environment=environment(), sections={}, ok=None)
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="clover-gpu-bench-"))
    write_json(args.out / "summary.json", summary)
    try:
        for name, ops in sections.items():
            _, need, cap = SECTIONS[name]
            left = deadline - (time.perf_counter() - start)
            entry: dict = dict(cap_seconds=DRY_CAP if args.dry_run else cap)
            if left < need:
                entry.update(status="skipped", reason=f"{left:.0f} s of the {deadline:.0f} s deadline "
                             f"left; this section needs about {need} s to start")
            else:
                print(f"gpu_bench: {name} (cap {min(entry['cap_seconds'], left):.0f} s)", flush=True)
                t0 = time.perf_counter()
                status, rc = run_child(child_cmd(args, name, ops, work), min(entry["cap_seconds"], left))
                entry.update(status=status, exit_code=rc, seconds=round(time.perf_counter() - t0, 1))
                doc = read(args.out / f"{name}.json")
                entry.update(complete=doc.get("complete", False), ok=doc.get("ok"))
            summary["sections"][name] = entry
            summary["elapsed_seconds"] = round(time.perf_counter() - start, 1)
            write_json(args.out / "summary.json", summary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bad = [n for n, e in summary["sections"].items()
           if e["status"] in ("failed", "timed_out") or e.get("ok") is False]
    summary["ok"] = not bad
    write_json(args.out / "summary.json", summary)
    report(args, summary)
    return 1 if bad else 0


def read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def report(args: argparse.Namespace, summary: dict) -> None:
    """Print the sections' outcome and headline figures last (a device call returns the tail)."""
    docs = {name: read(args.out / f"{name}.json") for name in summary["sections"]}
    if args.json:
        write_json(args.json, dict(summary, **{f"section_{n}": d for n, d in docs.items()}))
    print(f"{'section':<10}{'status':<11}{'ok':<7}{'seconds':>8}  figures")
    for name, e in summary["sections"].items():
        d = docs[name]
        figures = e.get("reason", "")
        if name == "generate" and d.get("runs"):
            r = d["runs"][-1]
            figures = (f"{r['device']} {r['dtype']} kernels={r['kernels']} {r['forwards_per_second']} fwd/s "
                       f"{r['tokens_per_second']} tok/s ({r['device_name']})")
        elif name == "kernels" and d.get("rows"):
            figures = f"{len(d['rows'])} rows, ops done: {','.join(d.get('done', []))}"
        elif name == "model" and "t_fwd_1_ms" in d:
            figures = (f"t_fwd 1/32/64 = {d['t_fwd_1_ms']}/{d['t_fwd_32_ms']}/{d['t_fwd_64_ms']} ms, "
                       f"decode {d['decode_tokens_per_second']} tok/s")
        elif "error" in d:
            figures = d["error"][-200:]
        print(f"{name:<10}{e['status']:<11}{str(e.get('ok', '-')):<7}{e.get('seconds', 0):>8}  {figures}")
    print(f"gpu_bench: {'ok' if summary['ok'] else 'NOT ok'}; {summary.get('elapsed_seconds', 0)} s; "
          f"files in {args.out}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out = (args.out or Path(os.environ.get("OUT") or "gpu-bench-out")).resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.section:
        return run_section(args)
    if not args.dry_run:
        probe = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.is_available()"],
                               capture_output=True)
        if probe.returncode:
            sys.exit("gpu_bench: no CUDA device here; use --dry-run to check the script on the CPU")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
