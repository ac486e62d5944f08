"""Snapshots of a git working tree as tree objects, without touching the user's index or commits.

`clover fix` snapshots before the agent starts and at the end; the diff between the two trees is
exactly what changed in the meantime, whether by edit tools or by shell commands. Untracked
(non-ignored) files are included; `.clover/` is not.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from clover_cli.modes.worktree import EXCLUDED_FROM_DIFF, WorktreeError, git


def _pathspec() -> list[str]:
    return ["--", "."] + [f":(exclude){p}" for p in EXCLUDED_FROM_DIFF]


def is_git_worktree(root: Path) -> bool:
    """Whether `root` is inside a git working tree."""
    try:
        proc = git(root, "rev-parse", "--is-inside-work-tree", check=False)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def snapshot_tree(root: Path) -> str | None:
    """A tree object holding the working tree's current files; None outside git or on failure."""
    if not is_git_worktree(root):
        return None
    top = git(root, "rev-parse", "--show-toplevel").stdout.strip()
    fd, index = tempfile.mkstemp(prefix="clover-index-")
    os.close(fd)
    os.unlink(index)
    real = Path(top) / git(Path(top), "rev-parse", "--git-path", "index").stdout.strip()
    if real.is_file():
        shutil.copyfile(real, index)  # stat data from the real index spares re-hashing every file
    env = {"GIT_INDEX_FILE": index}
    try:
        git(Path(top), "add", "-A", *_pathspec(), env=env)
        return git(Path(top), "write-tree", env=env).stdout.strip() or None
    except (WorktreeError, OSError):
        return None
    finally:
        try:
            os.unlink(index)
        except OSError:
            pass


def diff_trees(root: Path, before: str, after: str) -> str:
    """A unified diff between two snapshot trees (paths relative to the repository top)."""
    proc = git(root, "diff", "--no-color", "--no-ext-diff", "--binary", before, after, check=False)
    return proc.stdout if proc.returncode == 0 else ""
