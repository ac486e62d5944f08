"""The predictions file the official SWE-bench harness reads, kept safe to interrupt.

One JSON line per instance: {"instance_id", "model_name_or_path", "model_patch"}. The whole file is
rewritten atomically (temp file + os.replace) after every finished instance, so an interrupted
batch leaves a valid file holding every instance finished so far.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from clover_cli.termsafe import utf8_safe
from clover_cli.tools.textio import atomic_write


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (a reader never sees half a file); a lone surrogate
    (a model's or server's broken text in a patch or report) is written as U+FFFD."""
    atomic_write(Path(path), utf8_safe(text).encode("utf-8"))


class PredictionsFile:
    """Thread-safe in-memory view of a predictions JSONL, flushed to disk on every change."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._rows: dict[str, dict] = {}
        self.unreadable_lines: list[int] = []
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        text = self.path.read_text(encoding="utf-8")
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                self.unreadable_lines.append(lineno)
                continue
            if isinstance(row, dict) and isinstance(row.get("instance_id"), str) \
                    and isinstance(row.get("model_patch"), str):
                self._rows[row["instance_id"]] = row
            else:
                self.unreadable_lines.append(lineno)
        if self.unreadable_lines:
            # Keep what the user had: the unreadable original stays beside the rewritten file.
            backup = self.path.with_name(self.path.name + ".bak")
            if not backup.exists():
                backup.write_text(text, encoding="utf-8")

    def __contains__(self, instance_id: str) -> bool:
        with self._lock:
            return instance_id in self._rows

    def get(self, instance_id: str) -> dict | None:
        """The stored row for an instance, or None."""
        with self._lock:
            row = self._rows.get(instance_id)
            return dict(row) if row else None

    def ids(self) -> list[str]:
        """Instance ids with a prediction, in file order."""
        with self._lock:
            return list(self._rows)

    def put(self, instance_id: str, model_name: str, patch: str) -> None:
        """Record (or replace) one prediction and rewrite the file atomically."""
        with self._lock:
            self._rows[instance_id] = {"instance_id": instance_id,
                                       "model_name_or_path": model_name,
                                       "model_patch": patch}
            self._flush_locked()

    def flush(self) -> None:
        """Write the file (also creates an empty one)."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in self._rows.values())
        from clover_cli.agent.redact import scrub  # the API key never reaches a file (docs/security.md)
        write_atomic(self.path, scrub(text))
