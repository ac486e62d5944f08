"""The batch report written beside the predictions (`preds.report.json`) and its summary.

Per instance: status ("done" | "skipped" | "error"), the agent's finish reason, patch size,
seconds, trajectory path, error message, and with --evaluate the local evaluation entry. Totals
count them. Rewritten atomically after every instance, like the predictions.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from clover_cli.modes.predictions import write_atomic

EVAL_NOTE = "local docker-free evaluation: a convenience, not the official SWE-bench harness"


def report_path(output: Path) -> Path:
    """`preds.jsonl` -> `preds.report.json` in the same folder."""
    output = Path(output)
    return output.with_name(output.stem + ".report.json")


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

    def totals(self) -> dict:
        """Counts over the instances recorded so far."""
        entries = list(self.instances.values())
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
        }

    def as_dict(self) -> dict:
        """The report as written to disk."""
        return {**self.header, "elapsed_s": round(time.monotonic() - self.started, 2),
                "totals": self.totals(), "instances": self.instances}

    def write(self) -> None:
        """Rewrite the report file."""
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        write_atomic(self.path, json.dumps(self.as_dict(), indent=2, ensure_ascii=False) + "\n")

    def summary(self) -> str:
        """The lines printed on stdout at the end of a batch."""
        t = self.totals()
        lines = [f"instances {t['instances']}: done {t['done']}, skipped {t['skipped']}, "
                 f"errors {t['errors']}, empty patches {t['empty_patches']}"]
        for key, entry in self.instances.items():
            if entry.get("status") == "error":
                lines.append(f"  error {key}: {entry.get('error', '')}")
        if t["evaluated"] or self.header.get("evaluate"):
            lines.append(f"resolved {t['resolved']}/{t['evaluated']} evaluated ({EVAL_NOTE})")
            for key, entry in self.instances.items():
                ev = entry.get("evaluation")
                if isinstance(ev, dict):
                    mark = "resolved" if ev.get("resolved") else "unresolved"
                    extra = f" ({ev['error']})" if ev.get("error") else ""
                    lines.append(f"  {mark} {key}{extra}")
        return "\n".join(lines)
