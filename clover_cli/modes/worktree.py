"""Disposable git worktrees at a base commit, from local clones only (no network).

`clover swebench` gives each instance `git worktree add --detach DEST BASE_COMMIT` of the local
clone `<repos-dir>/owner__name`, takes the patch with `git diff` against the base commit (new
files included, `.clover/` excluded) and removes the worktree afterwards.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
from collections import defaultdict
from pathlib import Path

from clover_cli.tools.gitutil import git_run

EXCLUDED_FROM_DIFF = (".clover",)

# `git worktree add/remove` edit the clone's shared metadata; one at a time per clone.
_repo_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_locks_guard = threading.Lock()


class WorktreeError(RuntimeError):
    """A worktree could not be made (missing clone, unknown commit); one line for the report."""


def git(cwd: Path, *args: str, input_text: str | None = None, check: bool = True,
        timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run hardened git (tools/gitutil.py's runner) in `cwd` as text, without a shell, prompts or
    network (`env`: extra variables); WorktreeError when it fails and `check`."""
    proc = git_run(Path(cwd), *args, env={"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
                   text=True, input=input_text, timeout=timeout)
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed: {msg[-1] if msg else proc.returncode}")
    return proc


def _lock_for(repo: Path) -> threading.Lock:
    with _locks_guard:
        return _repo_locks[str(repo.resolve())]


def find_clone(repos_dir: Path, repo_folder: str) -> Path:
    """The local clone `<repos_dir>/<owner__name>`; WorktreeError if it is not a git repository."""
    path = Path(repos_dir) / repo_folder
    if not path.is_dir():
        raise WorktreeError(f"repository clone not found: {path}")
    proc = git(path, "rev-parse", "--git-dir", check=False)
    if proc.returncode != 0:
        raise WorktreeError(f"not a git repository: {path}")
    return path


def resolve_commit(clone: Path, commit: str) -> str:
    """The full sha of `commit` in `clone`; WorktreeError if it is not there (never fetched)."""
    proc = git(clone, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise WorktreeError(f"commit {commit} not found in {clone} (nothing is fetched; update the clone)")
    return proc.stdout.strip()


def add_worktree(clone: Path, commit: str, dest: Path) -> Path:
    """Create a detached worktree of `clone` at `commit` in `dest` (replacing a stale one)."""
    sha = resolve_commit(clone, commit)
    dest = Path(dest)
    with _lock_for(clone):
        if dest.exists():
            _remove_locked(clone, dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        git(clone, "worktree", "add", "--detach", "--force", str(dest), sha)
    return dest


def _remove_locked(clone: Path, dest: Path) -> None:
    git(clone, "worktree", "remove", "--force", "--force", str(dest), check=False)
    if dest.exists():
        shutil.rmtree(dest, ignore_errors=True)
    git(clone, "worktree", "prune", check=False)


def remove_worktree(clone: Path, dest: Path) -> None:
    """Remove a worktree made by add_worktree; never raises."""
    try:
        with _lock_for(clone):
            _remove_locked(clone, Path(dest))
    except (OSError, subprocess.SubprocessError, WorktreeError):
        shutil.rmtree(dest, ignore_errors=True)


def _pathspec() -> list[str]:
    return ["--", "."] + [f":(exclude){p}" for p in EXCLUDED_FROM_DIFF]


def diff_worktree(worktree: Path, base_commit: str) -> str:
    """The worktree's changes against `base_commit` as a patch `git apply` takes.

    New files count; `.clover/` (checkpoints, sessions) does not. Uses the worktree's own index.
    """
    git(worktree, "add", "-A", *_pathspec())
    proc = git(worktree, "diff", "--cached", "--binary", "--no-color", "--no-ext-diff",
               "--no-renames", base_commit, *_pathspec())
    return proc.stdout


def apply_patch(worktree: Path, patch: str, what: str = "patch") -> tuple[bool, str]:
    """`git apply` a patch in the worktree; returns (ok, message)."""
    if not patch.strip():
        return True, f"{what} is empty"
    proc = git(worktree, "apply", "--whitespace=nowarn", "-", input_text=patch, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, f"{what} did not apply: {lines[-1] if lines else proc.returncode}"
    return True, f"{what} applied"
