"""The batch report written beside the predictions (`preds.report.json`) and its summary.

Per instance: status ("done" | "skipped" | "error"), the agent's finish reason, patch size,
seconds, trajectory path, error message, and with --evaluate the local evaluation entry. Totals
count them. Rewritten atomically after every instance, like the predictions.

Entries of an earlier report for instances this run does not touch (a re-run with
--instance-ids) are kept, like their lines in the predictions file: `totals` counts the whole
report, `run_totals` only this run.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from clover_cli.modes.swebench.predictions import write_atomic

EVAL_NOTE = ("local evaluation with the official grading rules, in local environments "
             "(the docker harness, --evaluate docker, is the reference)")


def report_path(output: Path) -> Path:
    """`preds.jsonl` -> `preds.report.json` in the same folder."""
    output = Path(output)
    return output.with_name(output.stem + ".report.json")


def eval_logs_dir(output: Path) -> Path:
    """`preds.jsonl` -> `preds.eval-logs/` (one framed test log per evaluated instance)."""
    output = Path(output)
    return output.with_name(output.stem + ".eval-logs")


def trajectories_dir(output: Path) -> Path:
    """`preds.jsonl` -> `preds.trajectories/` in the same folder."""
    output = Path(output)
    return output.with_name(output.stem + ".trajectories")


class BatchReport:
    """Thread-safe report; `set()` updates one instance and rewrites the file."""

    def __init__(self, path: Path, header: dict):
        self.path = Path(path)
        self.header = dict(header)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.instances: dict[str, dict] = {}
        self.previous: dict[str, dict] = {}
        if self.path.is_file():
            try:
                old = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(old, dict) and isinstance(old.get("instances"), dict):
                    self.previous = old["instances"]
            except (OSError, ValueError):
                pass

    def set(self, key: str, entry: dict) -> None:
        """Record one instance's entry and rewrite the report."""
        with self._lock:
            self.instances[key] = entry
            self._write_locked()

    def merged(self) -> dict[str, dict]:
        """Earlier entries for instances this run has not recorded, then this run's entries."""
        kept = {k: v for k, v in self.previous.items() if k not in self.instances and isinstance(v, dict)}
        return {**kept, **self.instances}

    def run_totals(self) -> dict:
        """Counts over the instances recorded by this run."""
        return self.totals(self.instances)

    def totals(self, instances: dict[str, dict] | None = None) -> dict:
        """Counts over `instances` (default: the whole report, earlier entries included)."""
        entries = list((self.merged() if instances is None else instances).values())
        evaluated = [e["evaluation"] for e in entries if isinstance(e.get("evaluation"), dict)]
        return {
            "instances": len(entries),
            "done": sum(e.get("status") == "done" for e in entries),
            "skipped": sum(e.get("status") == "skipped" for e in entries),
            "errors": sum(e.get("status") == "error" for e in entries),
            "empty_patches": sum(e.get("status") in ("done", "skipped") and e.get("patch_lines") == 0
                                 for e in entries),
            "evaluated": len(evaluated),
            "resolved": sum(bool(ev.get("resolved")) for ev in evaluated),
            "unresolved": sum(_verdict(ev) == "unresolved" for ev in evaluated),
            "eval_errors": sum(_verdict(ev) == "error" for ev in evaluated),
        }

    def as_dict(self) -> dict:
        """The report as written to disk."""
        return {**self.header, "elapsed_s": round(time.monotonic() - self.started, 2),
                "totals": self.totals(), "run_totals": self.run_totals(), "instances": self.merged()}

    def write(self) -> None:
        """Rewrite the report file."""
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        write_atomic(self.path, json.dumps(self.as_dict(), indent=2, ensure_ascii=False) + "\n")

    def summary(self) -> str:
        """The lines printed on stdout at the end of a batch."""
        t = self.run_totals()
        lines = [f"instances {t['instances']}: done {t['done']}, skipped {t['skipped']}, "
                 f"errors {t['errors']}, empty patches {t['empty_patches']}"]
        kept = len(self.merged()) - len(self.instances)
        if kept:
            lines.append(f"the report also keeps {kept} earlier instance(s) not in this run")
        for key, entry in self.instances.items():
            if entry.get("status") == "error":
                lines.append(f"  error {key}: {entry.get('error', '')}")
        if t["evaluated"] or self.header.get("evaluate") in (True, "local"):
            lines.append(f"resolved {t['resolved']}/{t['evaluated']} evaluated ({EVAL_NOTE})")
            for key, entry in self.instances.items():
                ev = entry.get("evaluation")
                if isinstance(ev, dict):
                    why = ev.get("reason") or ev.get("error")
                    lines.append(f"  {_verdict(ev)} {key}" + (f" ({why})" if why else ""))
        return "\n".join(lines)


def _verdict(ev: dict) -> str:
    if ev.get("verdict") in ("resolved", "unresolved", "error"):
        return ev["verdict"]
    return "resolved" if ev.get("resolved") else ("error" if ev.get("error") else "unresolved")
