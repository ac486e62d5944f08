"""Checkpoints: the bytes of every file a tool is about to write, saved so `undo` can restore them.

Stored as plain files under `<root>/.clover/checkpoints/<id>/` (a manifest plus one blob per
file), so it works the same inside and outside git and never touches branches, index or stash.

Groups: `with CheckpointStore(root).group("fix attempt 2"):` (or begin_group/end_group) tags
every checkpoint written in this process for that root while the group is open with one group
id, and `undo()` then restores the whole group in one call. The open group lives in a
process-wide registry keyed by the resolved root and in `.clover/checkpoints/active_group.json`
(with the owning pid), so the CheckpointStore instances the tools create pick it up.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .base import ToolResult
from .paths import PRIVATE_DIR, PathError, resolve_in_root
from .textio import atomic_write


MAX_CHECKPOINTS = 500
ACTIVE_GROUP_FILE = "active_group.json"
_GROUPS: dict[Path, dict] = {}  # resolved root -> {"id", "label"} of the open group
_GROUPS_LOCK = threading.Lock()


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
    """sha256 of the file's bytes ("link:TARGET" for a symlink), or None when it does not exist."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        return _sha(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None


@dataclass
class Checkpoint:
    """One saved state: the files a single tool call is about to change."""
    id: int
    directory: Path
    label: str
    entries: list[dict] = field(default_factory=list)
    group: dict | None = None


class CheckpointStore:
    """Save files before a tool writes them; `undo()` restores the newest checkpoint."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()
        self.directory = self.root / PRIVATE_DIR / "checkpoints"

    # -- groups ---------------------------------------------------------------------------
    def begin_group(self, label: str) -> str:
        """Open a group: checkpoints written in this process until end_group() share its id.

        Returns the group id. Opening a new group closes any group still open for this root.
        """
        group = {"id": f"g{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}",
                 "label": label, "pid": os.getpid(), "started": time.time()}
        ensure_private_dir(self.root)
        self.directory.mkdir(exist_ok=True)
        atomic_write(self.directory / ACTIVE_GROUP_FILE, json.dumps(group).encode(), 0o644)
        with _GROUPS_LOCK:
            _GROUPS[self.root] = group
        return group["id"]

    def end_group(self) -> None:
        """Close the open group of this root (a no-op when none is open)."""
        with _GROUPS_LOCK:
            _GROUPS.pop(self.root, None)
        marker = self.directory / ACTIVE_GROUP_FILE
        try:
            if json.loads(marker.read_text()).get("pid") == os.getpid():
                marker.unlink()
        except (OSError, ValueError):
            pass

    @contextmanager
    def group(self, label: str) -> Iterator[str]:
        """Context manager form of begin_group/end_group; yields the group id."""
        group_id = self.begin_group(label)
        try:
            yield group_id
        finally:
            self.end_group()

    def active_group(self) -> dict | None:
        """The open group for this root in this process ({"id", "label", ...}), or None."""
        with _GROUPS_LOCK:
            group = _GROUPS.get(self.root)
        if group is not None:
            return group
        try:  # e.g. another copy of this module in the same process opened it
            group = json.loads((self.directory / ACTIVE_GROUP_FILE).read_text())
        except (OSError, ValueError):
            return None
        return group if isinstance(group, dict) and group.get("pid") == os.getpid() else None

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
        active = self.active_group()
        cp = Checkpoint(cp_id, cp_dir, label,
                        group={"id": active["id"], "label": active.get("label", "")}
                        if active else None)
        for i, rel in enumerate(dict.fromkeys(paths)):
            full = self.root / rel
            entry: dict = {"path": rel, "existed": full.is_file(), "mode": None, "blob": None,
                           "after": None, "created_dir": None}
            if full.is_symlink():  # a link the tool deletes or renames: keep the link itself
                entry.update(existed=True, link=os.readlink(full))
            elif entry["existed"]:
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
            entry["after"] = self._current(entry["path"])
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

        When the newest checkpoint belongs to a group, the whole group is restored (newest
        first) in one call. Files created by the agent are removed. If a file was changed after
        the agent wrote it, nothing is restored unless `force` is set.
        """
        ids = sorted(self._ids())
        if not ids:
            return ToolResult(False, "Nothing to undo: no checkpoints in this repository.",
                              {"error": "no_checkpoint"})
        loaded = []  # (id, dir, manifest), newest first
        for cp_id in reversed(ids):
            cp_dir = self.directory / f"{cp_id:06d}"
            try:
                manifest = json.loads((cp_dir / "manifest.json").read_text())
            except (OSError, ValueError) as exc:
                if loaded:  # the group ends at an unreadable checkpoint
                    break
                return ToolResult(False, f"Checkpoint {cp_id} is unreadable ({exc}); remove "
                                  f"{cp_dir} to undo further.", {"error": "corrupt_checkpoint"})
            if loaded and (manifest.get("group") is None
                           or manifest.get("group") != loaded[0][2].get("group")):
                break
            loaded.append((cp_id, cp_dir, manifest))
            if manifest.get("group") is None:
                break
        newest = loaded[0][2]
        try:
            for _, _, manifest in loaded:
                for e in manifest["entries"]:
                    resolve_in_root(self.root, e["path"], for_write=True)
        except PathError as exc:
            return ToolResult(False, f"Checkpoint {loaded[0][0]} is unsafe: {exc}",
                              {"error": "unsafe"})
        conflicts = [] if force else self._conflicts(loaded)
        if conflicts:
            return ToolResult(False, "Not undone: these files changed after Clover edited them: "
                              + ", ".join(conflicts) + ". Undo would overwrite those changes; "
                              "run `clover undo --force` to restore anyway.",
                              {"error": "conflict", "conflicts": conflicts,
                               "checkpoint": loaded[0][0]})
        first_state: dict[str, bool] = {}  # path -> existed before the oldest checkpoint
        for _, cp_dir, manifest in loaded:  # newest first: the oldest state is put back last
            self._restore_entries(cp_dir, manifest["entries"])
            shutil.rmtree(cp_dir, ignore_errors=True)
            for e in manifest["entries"]:
                first_state[e["path"]] = bool(e["existed"] or e.get("link"))
        paths = list(dict.fromkeys(e["path"] for _, _, m in reversed(loaded) for e in m["entries"]))
        restored = [p for p in paths if first_state[p]]
        removed = [p for p in paths if not first_state[p]]
        parts = []
        if restored:
            parts.append("restored " + ", ".join(restored))
        if removed:
            parts.append("removed created " + ", ".join(removed))
        left = len(ids) - len(loaded)
        tail = f". {left} earlier checkpoint{'s' if left != 1 else ''} remain."
        cp_ids = sorted(cp_id for cp_id, _, _ in loaded)
        details = {"checkpoint": cp_ids[-1], "checkpoints": cp_ids, "restored": restored,
                   "removed": removed, "remaining": left}
        if newest.get("group"):
            details["group"] = newest["group"]
            span = f"{cp_ids[0]}" if len(cp_ids) == 1 else f"{cp_ids[0]}-{cp_ids[-1]}"
            text = (f"Undid group {newest.get('group_label') or newest['group']} "
                    f"({len(cp_ids)} checkpoint{'s' if len(cp_ids) != 1 else ''}, {span}): "
                    + "; ".join(parts) + tail)
        else:
            text = f"Undid checkpoint {cp_ids[-1]} ({newest.get('label', '')}): " + "; ".join(parts) + tail
        return ToolResult(True, text, details)

    def _conflicts(self, loaded: list[tuple[int, Path, dict]]) -> list[str]:
        """Paths whose current bytes differ from what the newest checkpoint touching them wrote."""
        conflicts, seen = [], set()
        for _, _, manifest in loaded:  # newest first: its "after" is the state to expect
            for e in manifest["entries"]:
                if e["path"] in seen:
                    continue
                seen.add(e["path"])
                if manifest.get("complete") and self._current(e["path"]) != e["after"]:
                    conflicts.append(e["path"])
        return conflicts

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
        if cp.group:
            manifest["group"] = cp.group["id"]
            manifest["group_label"] = cp.group["label"]
        atomic_write(cp.directory / "manifest.json", json.dumps(manifest, indent=1).encode(), 0o644)

    def _current(self, rel: str) -> str | None:
        return _state(self.root / rel)

    def _restore_entries(self, cp_dir: Path, entries: list[dict]) -> None:
        for e in entries:
            full = self.root / e["path"]
            if e.get("link") is not None:
                if full.is_symlink() or full.is_file():
                    full.unlink()
                full.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(e["link"], full)
            elif e["existed"]:
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
