"""Git helpers (gitpython): is it a repo, which branch, what changed. Read-only for the user's
branches, index and stash: the working-tree diff is built in a throwaway index file."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
EXCLUDE_PRIVATE = ":(exclude,glob)**/.clover/**"


def _repo(root: Path):
    import git  # gitpython; imported lazily (it is slow to import)
    try:
        return git.Repo(Path(root), search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def git_run(root: Path, *args: str, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run `git ARGS` in `root` and capture bytes (no pager, no colour, no prompts)."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", **(env or {})}
    # a repository's own config never runs programs for us (docs/security.md, "Shell sandbox")
    return subprocess.run(["git", "-c", "core.quotepath=off", "-c", "core.fsmonitor=false",
                           "-c", "core.hooksPath=/dev/null", *args], cwd=root, env=full_env,
                          stdin=subprocess.DEVNULL, capture_output=True, check=check)


def is_git_repo(root: Path) -> bool:
    """True when `root` is inside a git working tree."""
    if shutil.which("git") is None:
        return False
    res = git_run(Path(root), "rev-parse", "--is-inside-work-tree")
    return res.returncode == 0 and res.stdout.strip() == b"true"


def current_branch(root: Path) -> str | None:
    """The checked-out branch name; None outside git or on a detached HEAD."""
    repo = _repo(root)
    if repo is None:
        return None
    try:
        return repo.active_branch.name
    except (TypeError, ValueError):
        return None


def status(root: Path) -> list[dict]:
    """`git status --porcelain` as a list of {"path", "index", "worktree"}; [] outside git."""
    if not is_git_repo(root):
        return []
    out = git_run(Path(root), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--",
                  ".", EXCLUDE_PRIVATE).stdout.decode("utf-8", "replace")
    items, fields = [], out.split("\0")
    i = 0
    while i < len(fields):
        rec = fields[i]
        i += 1
        if len(rec) < 4:
            continue
        entry = {"index": rec[0], "worktree": rec[1], "path": rec[3:]}
        if rec[0] in "RC":
            entry["orig_path"] = fields[i]
            i += 1
        items.append(entry)
    return items


def diff_against(root: Path, base: str = "HEAD") -> str:
    """Unified diff of the working tree (untracked files included) against commit `base`.

    A copy of the index in a temporary file collects the untracked files, so the user's
    real index is never modified. Clover's `.clover/` is excluded. "" outside git.
    """
    root = Path(root).resolve()
    if not is_git_repo(root):
        return ""
    index_path = git_run(root, "rev-parse", "--git-path", "index").stdout.decode().strip()
    real_index = (root / index_path) if not os.path.isabs(index_path) else Path(index_path)
    if git_run(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}").returncode != 0:
        base = EMPTY_TREE
    with tempfile.TemporaryDirectory(prefix="clover-index-") as tmp:
        tmp_index = Path(tmp) / "index"
        if real_index.exists():
            shutil.copy2(real_index, tmp_index)  # keep its mtime: git's racy-entry check needs it
        env = {"GIT_INDEX_FILE": str(tmp_index)}
        git_run(root, "add", "-A", "--", ".", EXCLUDE_PRIVATE, env=env)
        res = git_run(root, "diff", "--cached", "--no-color", "--no-ext-diff", "-M", base,
                      "--", ".", EXCLUDE_PRIVATE, env=env)
    return res.stdout.decode("utf-8", "replace")
