"""Checkpoints: the bytes of every file a tool is about to write, saved so `undo` can restore them.

Stored outside the repository, in the user's state folder for it (tools/statedir.py):
`repo_state_dir(root, "checkpoints")/<id>/` holds `manifest.json` (with a digest of itself and a
sha256 per blob) and `blobs/`. A repository can therefore never ship checkpoints that undo would
read. Ids are `<time_ns>-<pid>-<random>`, created with an exclusive mkdir, so two processes never
share one; they sort oldest first. Writers and undo hold the repository's edit lock
(tools/lock.py). Undo verifies every manifest and blob it is about to use before it restores any
file, and puts everything back as it was if a write fails halfway (all or nothing).

Groups: `with CheckpointStore(root).group("fix attempt 2"):` (or begin_group/end_group) tags
every checkpoint written in this process for that root while the group is open with one group
id, and `undo()` then restores the whole group in one call. The open group lives in a
process-wide registry keyed by the resolved root and in `active_group.json` of the checkpoint
folder (with the owning pid), so the CheckpointStore instances the tools create pick it up.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

from . import fsat
from .base import ToolResult
from .checkpoint_manifest import CheckpointCorrupt, dump, load, unchanged
from .lock import LockError, repo_lock
from .paths import PRIVATE_DIR
from .statedir import repo_state_dir
from .textio import atomic_write


MAX_CHECKPOINTS = 500
ACTIVE_GROUP_FILE = "active_group.json"
_GROUPS: dict[Path, dict] = {}  # resolved root -> {"id", "label"} of the open group
_GROUPS_LOCK = threading.Lock()


def ensure_private_dir(root: Path) -> Path:
    """Create `<root>/.clover/` with a `.gitignore` that hides it from git but keeps the project's
    own `.clover/config.toml` committable. (Checkpoints and sessions no longer live there.)"""
    private = Path(root).resolve() / PRIVATE_DIR
    private.mkdir(exist_ok=True)
    ignore = private / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!config.toml\n")
    return private


def _state(root: Path, rel: str) -> str | None:
    """sha256 of the file's bytes ("link:TARGET" for a symlink), None when it does not exist."""
    try:
        now = fsat.probe(root, rel)
    except (OSError, ValueError):
        return "unreadable"
    if now.kind == "absent":
        return None
    if now.kind == "link":
        return "link:" + (now.link or "")
    if now.kind == "file":
        return hashlib.sha256(now.data or b"").hexdigest()
    return now.kind


def _new_id(after: str | None = None) -> str:
    """`<time_ns>-<pid>-<random>`, later than `after` even if the clock stepped back."""
    now = time.time_ns()
    if after:
        try:
            now = max(now, int(after.split("-", 1)[0]) + 1)
        except ValueError:
            pass
    return f"{now:020d}-{os.getpid()}-{secrets.token_hex(4)}"


@dataclass
class Checkpoint:
    """One saved state: the files a single tool call is about to change."""
    id: str
    directory: Path
    label: str
    entries: list[dict] = field(default_factory=list)
    group: dict | None = None


class CheckpointStore:
    """Save files before a tool writes them; `undo()` restores the newest checkpoint."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()
        self.directory = repo_state_dir(self.root, "checkpoints", create=False)
        self.problems: list[str] = []  # one line per checkpoint list() skipped

    # -- groups ---------------------------------------------------------------------------
    def begin_group(self, label: str) -> str:
        """Open a group: checkpoints written in this process until end_group() share its id.

        Returns the group id. Opening a new group closes any group still open for this root.
        """
        group = {"id": f"g{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}",
                 "label": label, "pid": os.getpid(), "started": time.time()}
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.directory / ACTIVE_GROUP_FILE, json.dumps(group).encode(), 0o600)
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
        except (OSError, ValueError, AttributeError):
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
        if isinstance(group, dict) and group.get("pid") == os.getpid() \
                and isinstance(group.get("id"), str):
            return group
        return None

    # -- writing side ---------------------------------------------------------------------
    def begin(self, paths: list[str], label: str) -> Checkpoint:
        """Save the current bytes and mode of `paths` (repo-relative) before they are written.
        Call it holding the edit lock (writes.execute does). OSError when it cannot."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        ids = self._ids()
        for old in ids[: max(0, len(ids) - MAX_CHECKPOINTS + 1)]:  # bounded history
            shutil.rmtree(self.directory / old, ignore_errors=True)
        while True:
            cp_id = _new_id(ids[-1] if ids else None)
            try:
                (self.directory / cp_id).mkdir(mode=0o700)  # exclusive: never shared
                break
            except FileExistsError:
                continue
        cp_dir = self.directory / cp_id
        active = self.active_group()
        cp = Checkpoint(cp_id, cp_dir, label,
                        group={"id": active["id"], "label": str(active.get("label", ""))}
                        if active else None)
        try:
            (cp_dir / "blobs").mkdir()
            for i, rel in enumerate(dict.fromkeys(paths)):
                cp.entries.append(self._capture(cp_dir, i, rel))
            self._save(cp, complete=False)
        except BaseException:
            shutil.rmtree(cp_dir, ignore_errors=True)
            raise
        return cp

    def _capture(self, cp_dir: Path, i: int, rel: str) -> dict:
        now = fsat.probe(self.root, rel)
        entry: dict = {"path": rel, "kind": now.kind, "after": None, "created_dir": None}
        if now.kind == "link":  # a link the tool deletes or renames: keep the link itself
            entry["link"] = now.link
        elif now.kind == "file":
            blob = f"{i:04d}"
            data = now.data or b""
            with open(cp_dir / "blobs" / blob, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            entry.update(blob=blob, mode=now.mode, size=len(data),
                         sha256=hashlib.sha256(data).hexdigest())
        elif now.kind == "absent":
            entry["created_dir"] = self._first_missing_dir(rel)
        else:
            raise OSError(f"{rel} is not a regular file ({'a directory' if now.kind == 'dir' else 'a FIFO, socket or device'})")
        return entry

    def finish(self, cp: Checkpoint) -> None:
        """Record the state after the write, so undo can tell whether the user changed it since."""
        for entry in cp.entries:
            entry["after"] = _state(self.root, entry["path"])
        self._save(cp, complete=True)

    def restore(self, cp: Checkpoint) -> list[str]:
        """Roll back a write that failed halfway: put back every file of `cp` that is no longer
        as saved, drop `cp`, and return those paths ([]: the write changed nothing). If putting a
        file back fails, the checkpoint stays (incomplete) for `clover undo`."""
        changed = [e for e in cp.entries if not unchanged(self.root, e)]
        self._restore_entries(cp.directory, changed)
        shutil.rmtree(cp.directory, ignore_errors=True)
        return [e["path"] for e in changed]

    # -- undo side ------------------------------------------------------------------------
    def list(self) -> list[dict]:
        """Manifests of the stored checkpoints, oldest first; a corrupt one is skipped and
        reported in `self.problems` (one line each)."""
        out, self.problems = [], []
        for cp_id in self._ids():
            try:
                out.append(load(self.directory / cp_id, self.root, blobs=False))
            except CheckpointCorrupt as exc:
                self.problems.append(f"checkpoint {cp_id} skipped: {exc}")
        return out

    def undo(self, force: bool = False) -> ToolResult:
        """Restore the newest checkpoint byte for byte and delete it; repeated calls walk back.

        When the newest checkpoint belongs to a group, the whole group is restored (newest
        first) in one call. Files created by the agent are removed. If a file was changed after
        the agent wrote it, nothing is restored unless `force` is set. Every manifest and blob
        is verified first; a damaged one restores nothing.
        """
        try:
            with repo_lock(self.root) as lock:
                result = self._undo(force)
        except LockError as exc:
            return ToolResult(False, f"Not undone: {exc}", {"error": "locked"})
        if lock.notice():
            result = replace(result, output=lock.notice() + result.output)
        return result

    def _undo(self, force: bool) -> ToolResult:
        ids = self._ids()
        if not ids:
            return ToolResult(False, "Nothing to undo: no checkpoints in this repository.",
                              {"error": "no_checkpoint"})
        loaded: list[tuple[str, Path, dict]] = []  # newest first
        for cp_id in reversed(ids):
            cp_dir = self.directory / cp_id
            try:
                manifest = load(cp_dir, self.root)
            except CheckpointCorrupt as exc:
                group = loaded[0][2].get("group") if loaded else None
                if loaded and (group is None or not _mentions(cp_dir, group)):
                    break  # the group ended before this unrelated checkpoint
                return ToolResult(False, f"Not undone: checkpoint {cp_id} is damaged: {exc}. "
                                  f"Nothing was restored. Remove {cp_dir} to undo past it.",
                                  {"error": "corrupt_checkpoint", "checkpoint": cp_id})
            if loaded and (manifest.get("group") is None
                           or manifest.get("group") != loaded[0][2].get("group")):
                break
            loaded.append((cp_id, cp_dir, manifest))
            if manifest.get("group") is None:
                break
        newest = loaded[0][2]
        position = {cp_id: n for n, cp_id in enumerate(ids, 1)}
        conflicts = [] if force else self._conflicts(loaded)
        if conflicts:
            return ToolResult(False, "Not undone: these files changed after Clover edited them: "
                              + ", ".join(conflicts) + ". Undo would overwrite those changes; "
                              "run `clover undo --force` to restore anyway.",
                              {"error": "conflict", "conflicts": conflicts,
                               "checkpoint": position[loaded[0][0]]})
        paths = list(dict.fromkeys(e["path"] for _, _, m in reversed(loaded) for e in m["entries"]))
        try:
            before = {rel: fsat.probe(self.root, rel) for rel in paths}  # the safety net
        except (OSError, ValueError) as exc:
            return ToolResult(False, f"Not undone: cannot read the current files ({exc}). "
                              "Nothing was restored.", {"error": "unreadable"})
        try:
            for _, cp_dir, manifest in loaded:  # newest first: the oldest state is put back last
                self._restore_entries(cp_dir, manifest["entries"])
        except (OSError, ValueError) as exc:
            self._put_back(before)
            return ToolResult(False, f"Not undone: restoring failed ({exc}); every file was put "
                              "back as it was before the undo.", {"error": "restore_failed"})
        for _, cp_dir, _ in loaded:
            shutil.rmtree(cp_dir, ignore_errors=True)
        first_state = {}  # path -> existed before the oldest checkpoint
        for _, _, manifest in loaded:
            for e in manifest["entries"]:
                first_state[e["path"]] = e["kind"] != "absent"
        restored = [p for p in paths if first_state[p]]
        removed = [p for p in paths if not first_state[p]]
        parts = []
        if restored:
            parts.append("restored " + ", ".join(restored))
        if removed:
            parts.append("removed created " + ", ".join(removed))
        left = len(ids) - len(loaded)
        tail = f". {left} earlier checkpoint{'s remain' if left != 1 else ' remains'}."
        numbers = sorted(position[cp_id] for cp_id, _, _ in loaded)
        details = {"checkpoint": numbers[-1], "checkpoints": numbers,
                   "ids": sorted(cp_id for cp_id, _, _ in loaded), "restored": restored,
                   "removed": removed, "remaining": left}
        if newest.get("group"):
            details["group"] = newest["group"]
            span = f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
            text = (f"Undid group {newest.get('group_label') or newest['group']} "
                    f"({len(numbers)} checkpoint{'s' if len(numbers) != 1 else ''}, {span}): "
                    + "; ".join(parts) + tail)
        else:
            text = f"Undid checkpoint {numbers[-1]} ({newest.get('label', '')}): " + "; ".join(parts) + tail
        return ToolResult(True, text, details)

    def _conflicts(self, loaded: list[tuple[str, Path, dict]]) -> list[str]:
        """Paths whose current bytes differ from what the newest checkpoint touching them wrote."""
        conflicts, seen = [], set()
        for _, _, manifest in loaded:  # newest first: its "after" is the state to expect
            for e in manifest["entries"]:
                if e["path"] in seen:
                    continue
                seen.add(e["path"])
                if manifest.get("complete") and _state(self.root, e["path"]) != e["after"]:
                    conflicts.append(e["path"])
        return conflicts

    def _put_back(self, before: dict[str, fsat.Probe]) -> None:
        for rel, was in before.items():
            try:
                if was.kind == "file":
                    fsat.write_atomic(self.root, rel, was.data or b"", was.mode)
                elif was.kind == "link":
                    fsat.write_link(self.root, rel, was.link or "")
                elif was.kind == "absent":
                    fsat.remove(self.root, rel)
            except (OSError, ValueError):
                continue

    # -- internals ------------------------------------------------------------------------
    def _ids(self) -> list[str]:
        """Checkpoint folder names, oldest first."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return sorted(n for n in names if n[:1].isdigit() and "-" in n)

    def _first_missing_dir(self, rel: str) -> str | None:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fsat.probe(self.root, prefix, read=False).kind == "absent":
                return prefix
        return None

    def _save(self, cp: Checkpoint, complete: bool) -> None:
        body = {"version": 2, "id": cp.id, "label": cp.label, "time": time.time(),
                "pid": os.getpid(), "complete": complete, "entries": cp.entries}
        if cp.group:
            body["group"] = cp.group["id"]
            body["group_label"] = cp.group["label"]
        atomic_write(cp.directory / "manifest.json", dump(body), 0o600)

    def _restore_entries(self, cp_dir: Path, entries: list[dict]) -> None:
        for e in entries:
            rel = e["path"]
            if e["kind"] == "link":
                fsat.write_link(self.root, rel, e["link"])
            elif e["kind"] == "file":
                data = (cp_dir / "blobs" / e["blob"]).read_bytes()
                if "sha256" in e and hashlib.sha256(data).hexdigest() != e["sha256"]:
                    raise OSError(f"the saved copy of {rel} changed while undoing")
                fsat.write_atomic(self.root, rel, data, e["mode"])
            else:
                fsat.remove(self.root, rel)
                if e.get("created_dir"):
                    fsat.remove_empty_dirs(self.root, rel.rsplit("/", 1)[0], e["created_dir"])


def _mentions(cp_dir: Path, group: str) -> bool:
    """Whether a damaged manifest still names `group` (so it belonged to the group)."""
    try:
        return group.encode() in (cp_dir / "manifest.json").read_bytes()
    except OSError:
        return True
