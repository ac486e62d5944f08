"""The shared write path of the editing tools: a plan of new file contents, computed without
touching the disk, then checkpointed and written atomically (all or nothing).

A tool call runs its planning and writing inside `locked(root, ...)`, holding the repository's
edit lock (tools/lock.py) from the read to the finished checkpoint, so a second process cannot
overwrite an edit it never saw. Files are written relative to a verified directory descriptor
(tools/fsat.py): a directory swapped for a symlink mid-write fails the write, and the write is
rolled back, instead of landing outside the root.

A process killed mid-write (`kill -9`) leaves its `.clover-*.tmp` next to the target (the
target itself is intact: the rename never happened). The next write, holding the same lock,
removes such leftovers from the folders it writes and from those of the newest checkpoint (the
interrupted write's): every Clover write into the repository holds the lock, so no temporary
file of a live write can be among them."""
from __future__ import annotations

import difflib
import json
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from . import fsat
from .base import ToolResult
from .checkpoints import CheckpointStore
from .lock import LockError, repo_lock
from .textio import decode, is_binary


@dataclass
class FileWrite:
    """One file's planned change. `new` None means delete; `old` None means it does not exist."""
    path: str              # repo-relative
    new: bytes | None
    old: bytes | None
    mode: int | None = None
    link: str | None = None   # create a symlink with this text instead of writing `new`


@dataclass
class Plan:
    """Everything a writing tool call would do."""
    writes: list[FileWrite] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return list(dict.fromkeys(w.path for w in self.writes))


def locked(root: Path, call: Callable[[], ToolResult]) -> ToolResult:
    """Run `call` (plan and execute) holding the repository's edit lock; a lock held too long
    by another process is a clear failure, and a noticeable wait is said in the result."""
    try:
        with repo_lock(root) as lock:
            result = call()
    except LockError as exc:
        return ToolResult(False, f"{exc}", {"error": "locked"})
    notice = lock.notice()
    return replace(result, output=notice + result.output) if notice else result


def execute(root: Path, plan: Plan, label: str) -> ToolResult | None:
    """Checkpoint the plan's files, then write them. None on success, a failure result otherwise
    (after rolling every file back)."""
    root = Path(root).resolve()
    try:
        with repo_lock(root):
            return _execute(root, plan, label)
    except LockError as exc:
        return ToolResult(False, f"{exc}", {"error": "locked"})


def _execute(root: Path, plan: Plan, label: str) -> ToolResult | None:
    store = CheckpointStore(root)
    clear_stale_temps(root, plan.paths + _newest_checkpoint_paths(store))
    try:
        cp = store.begin(plan.paths, label)
    except (OSError, ValueError) as exc:
        return ToolResult(False, f"could not save a checkpoint, nothing written: {exc}",
                          {"error": "checkpoint"})
    path = ""
    try:
        for w in plan.writes:
            path = w.path
            if w.new is None:
                fsat.remove(root, w.path)  # a symlink is removed itself, never its target
            elif w.link is not None:
                fsat.write_link(root, w.path, w.link)
            else:
                fsat.write_atomic(root, w.path, w.new, w.mode)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else _one_line(exc)
        return _rolled_back(store, cp, f"cannot write {path}: {why}")
    try:
        store.finish(cp)
    except OSError:
        pass  # the write is done; undo treats the checkpoint as unfinished (no conflict check)
    return None


def _rolled_back(store: CheckpointStore, cp, why: str) -> ToolResult:
    """The result of a failed write after putting back what it changed; the checkpoint is kept
    (and `clover undo` advised) only when a changed file could not be put back."""
    try:
        restored = store.restore(cp)
    except (OSError, ValueError) as again:
        return ToolResult(False, f"write failed ({why}) and rolling back failed too "
                          f"({_one_line(again)}); run `clover undo` to restore the files.", {"error": "write"})
    if not restored:
        return ToolResult(False, f"write failed, nothing was changed: {why}", {"error": "write"})
    return ToolResult(False, f"write failed, every file was restored ({', '.join(restored)}): {why}",
                      {"error": "write"})


_TEMP = re.compile(r"\.clover-[0-9a-f]{12}\.tmp")  # fsat._tmp_name()


def clear_stale_temps(root: Path, paths: list[str]) -> int:
    """Remove the temporary files an interrupted write left in the folders of `paths`
    (repo-relative); call it holding the edit lock. How many were removed."""
    removed = 0
    for folder in dict.fromkeys(p.rpartition("/")[0] for p in paths):
        try:
            with fsat.parent_dir(root, (folder + "/" if folder else "") + "x") as (dfd, _):
                for name in os.listdir(dfd):
                    if _TEMP.fullmatch(name):
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                            os.unlink(name, dir_fd=dfd)
                            removed += 1
        except (OSError, ValueError):
            continue  # a folder that is gone or refused: nothing of ours to clear
    return removed


def _newest_checkpoint_paths(store: CheckpointStore) -> list[str]:
    """The paths of the newest checkpoint (the write a kill interrupted, if one was)."""
    try:
        newest = max((n for n in os.listdir(store.directory) if n[:1].isdigit() and "-" in n), default=None)
        if newest is None:
            return []
        body = json.loads((store.directory / newest / "manifest.json").read_bytes()[:1 << 20])
        return [e["path"] for e in body.get("entries", [])[:1000]
                if isinstance(e, dict) and isinstance(e.get("path"), str)]
    except (OSError, ValueError, AttributeError):
        return []


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _text_lines(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    if is_binary(data):
        return None
    return decode(data)[0].splitlines(keepends=True)


def render_diff(plan: Plan) -> str:
    """A unified diff of the plan (what an approval prompt shows)."""
    out = []
    for w in plan.writes:
        a = "/dev/null" if w.old is None else f"a/{w.path}"
        b = "/dev/null" if w.new is None else f"b/{w.path}"
        old, new = _text_lines(w.old), _text_lines(w.new)
        if old is None or new is None:
            out.append(f"Binary file {w.path} changes\n")
            continue
        lines = list(difflib.unified_diff(old, new, a, b))
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
