"""Checkpoints: the bytes of every file a tool is about to write, saved so `undo` can restore them.

Stored as plain files under `<root>/.clover/checkpoints/<id>/` (a manifest plus one blob per
file), so it works the same inside and outside git and never touches branches, index or stash.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from .base import ToolResult
from .paths import PRIVATE_DIR, PathError, resolve_in_root
from .textio import atomic_write


MAX_CHECKPOINTS = 500


def ensure_private_dir(root: Path) -> Path:
    """Create `<root>/.clover/` with a `.gitignore` that hides Clover's state from git (sessions,
    checkpoints, caches) but keeps the project's own `.clover/config.toml` committable."""
    private = Path(root).resolve() / PRIVATE_DIR
    private.mkdir(exist_ok=True)
    ignore = private / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!config.toml\n")
    return private


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _state(path: Path) -> str | None:
    """sha256 of the file's bytes, or None when it does not exist."""
    try:
        return _sha(path.read_bytes())
    except FileNotFoundError:
        return None


@dataclass
class Checkpoint:
    """One saved state: the files a single tool call is about to change."""
    id: int
    directory: Path
    label: str
    entries: list[dict] = field(default_factory=list)


class CheckpointStore:
    """Save files before a tool writes them; `undo()` restores the newest checkpoint."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()
        self.directory = self.root / PRIVATE_DIR / "checkpoints"

    # -- writing side ---------------------------------------------------------------------
    def begin(self, paths: list[str], label: str) -> Checkpoint:
        """Save the current bytes and mode of `paths` (repo-relative) before they are written."""
        ensure_private_dir(self.root)
        self.directory.mkdir(exist_ok=True)
        ids = sorted(self._ids())
        for old in ids[: max(0, len(ids) - MAX_CHECKPOINTS + 1)]:  # bounded history
            shutil.rmtree(self.directory / f"{old:06d}", ignore_errors=True)
        cp_id = (ids[-1] if ids else 0) + 1
        cp_dir = self.directory / f"{cp_id:06d}"
        (cp_dir / "blobs").mkdir(parents=True)
        cp = Checkpoint(cp_id, cp_dir, label)
        for i, rel in enumerate(dict.fromkeys(paths)):
            full = self.root / rel
            entry: dict = {"path": rel, "existed": full.is_file(), "mode": None, "blob": None,
                           "after": None, "created_dir": None}
            if entry["existed"]:
                blob = f"{i:04d}"
                shutil.copyfile(full, cp_dir / "blobs" / blob)
                entry.update(blob=blob, mode=stat.S_IMODE(full.stat().st_mode))
            else:
                entry["created_dir"] = self._first_missing_dir(full)
            cp.entries.append(entry)
        self._save(cp, complete=False)
        return cp

    def finish(self, cp: Checkpoint) -> None:
        """Record the state after the write, so undo can tell whether the user changed it since."""
        for entry in cp.entries:
            entry["after"] = _state(self.root / entry["path"])
        self._save(cp, complete=True)

    def restore(self, cp: Checkpoint) -> None:
        """Put back every file of `cp` (used to roll back a write that failed halfway)."""
        self._restore_entries(cp.directory, cp.entries)
        shutil.rmtree(cp.directory, ignore_errors=True)

    # -- undo side ------------------------------------------------------------------------
    def list(self) -> list[dict]:
        """Manifests of the stored checkpoints, oldest first."""
        out = []
        for cp_id in sorted(self._ids()):
            try:
                out.append(json.loads((self.directory / f"{cp_id:06d}" / "manifest.json").read_text()))
            except (OSError, ValueError):
                continue
        return out

    def undo(self, force: bool = False) -> ToolResult:
        """Restore the newest checkpoint byte for byte and delete it; repeated calls walk back.

        Files created by the agent are removed. If a file was changed after the agent wrote it,
        nothing is restored unless `force` is set.
        """
        ids = sorted(self._ids())
        if not ids:
            return ToolResult(False, "Nothing to undo: no checkpoints in this repository.",
                              {"error": "no_checkpoint"})
        cp_dir = self.directory / f"{ids[-1]:06d}"
        try:
            manifest = json.loads((cp_dir / "manifest.json").read_text())
        except (OSError, ValueError) as exc:
            return ToolResult(False, f"Checkpoint {ids[-1]} is unreadable ({exc}); remove "
                              f"{cp_dir} to undo further.", {"error": "corrupt_checkpoint"})
        entries = manifest["entries"]
        try:
            for e in entries:
                resolve_in_root(self.root, e["path"], for_write=True)
        except PathError as exc:
            return ToolResult(False, f"Checkpoint {ids[-1]} is unsafe: {exc}", {"error": "unsafe"})
        conflicts = []
        if manifest.get("complete") and not force:
            conflicts = [e["path"] for e in entries if _state(self.root / e["path"]) != e["after"]]
        if conflicts:
            return ToolResult(False, "Not undone: these files changed after Clover edited them: "
                              + ", ".join(conflicts) + ". Undo would overwrite those changes; "
                              "run `clover undo --force` to restore anyway.",
                              {"error": "conflict", "conflicts": conflicts, "checkpoint": ids[-1]})
        self._restore_entries(cp_dir, entries)
        shutil.rmtree(cp_dir, ignore_errors=True)
        restored = [e["path"] for e in entries if e["existed"]]
        removed = [e["path"] for e in entries if not e["existed"]]
        parts = []
        if restored:
            parts.append("restored " + ", ".join(restored))
        if removed:
            parts.append("removed created " + ", ".join(removed))
        left = len(ids) - 1
        text = (f"Undid checkpoint {ids[-1]} ({manifest.get('label', '')}): " + "; ".join(parts)
                + f". {left} earlier checkpoint{'s' if left != 1 else ''} remain.")
        return ToolResult(True, text, {"checkpoint": ids[-1], "restored": restored,
                                       "removed": removed, "remaining": left})

    # -- internals ------------------------------------------------------------------------
    def _ids(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return [int(p.name) for p in self.directory.iterdir() if p.name.isdigit()]

    def _first_missing_dir(self, full: Path) -> str | None:
        missing = None
        probe = full.parent
        while probe != self.root and not probe.exists():
            missing = probe
            probe = probe.parent
        return missing.relative_to(self.root).as_posix() if missing else None

    def _save(self, cp: Checkpoint, complete: bool) -> None:
        manifest = {"id": cp.id, "label": cp.label, "time": time.time(), "complete": complete,
                    "entries": cp.entries}
        atomic_write(cp.directory / "manifest.json", json.dumps(manifest, indent=1).encode(), 0o644)

    def _restore_entries(self, cp_dir: Path, entries: list[dict]) -> None:
        for e in entries:
            full = self.root / e["path"]
            if e["existed"]:
                atomic_write(full, (cp_dir / "blobs" / e["blob"]).read_bytes(), e["mode"])
            else:
                try:
                    full.unlink()
                except FileNotFoundError:
                    pass
                if e.get("created_dir"):
                    self._remove_empty_dirs(full.parent, self.root / e["created_dir"])

    def _remove_empty_dirs(self, start: Path, top: Path) -> None:
        probe = start
        while True:
            try:
                os.rmdir(probe)
            except OSError:
                return
            if probe == top or probe == self.root:
                return
            probe = probe.parent
