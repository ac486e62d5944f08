"""The shared write path of the editing tools: a plan of new file contents, computed without
touching the disk, then checkpointed and written atomically (all or nothing)."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from .base import ToolResult
from .checkpoints import CheckpointStore
from .textio import atomic_write, decode, is_binary


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


def execute(root: Path, plan: Plan, label: str) -> ToolResult | None:
    """Checkpoint the plan's files, then write them. None on success, a failure result otherwise
    (after rolling every file back)."""
    root = Path(root).resolve()
    store = CheckpointStore(root)
    try:
        cp = store.begin(plan.paths, label)
    except OSError as exc:
        return ToolResult(False, f"could not save a checkpoint, nothing written: {exc}",
                          {"error": "checkpoint"})
    try:
        for w in plan.writes:
            full = root / w.path
            if w.new is None:
                if full.exists() or full.is_symlink():
                    os.unlink(full)  # a symlink is removed itself, never its target
            elif w.link is not None:
                _write_link(full, w.link)
            else:
                atomic_write(full, w.new, w.mode)
    except OSError as exc:
        store.restore(cp)
        return ToolResult(False, f"write failed, every file was restored: {exc}", {"error": "write"})
    store.finish(cp)
    return None


def _write_link(full: Path, target: str) -> None:
    """Create (or atomically replace) the symlink `full` -> `target`."""
    full.parent.mkdir(parents=True, exist_ok=True)
    tmp = full.parent / f".{full.name}.clover-link"
    if tmp.is_symlink() or tmp.exists():
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, full)


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
