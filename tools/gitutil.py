"""Git helpers: the hardened git runner; is it a repo, which branch, what changed. Read-only for the user's
branches, index and stash: the working-tree diff is built in a throwaway index file."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import githarden
from .gitincludes import GitConfigRefused, check_includes

GIT_TIMEOUT = 60.0  # seconds any git call Clover makes may take, unless its caller says otherwise


class GitTimeout(OSError):
    """A git call that did not finish within its timeout (it was killed)."""

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
EXCLUDE_PRIVATE = ":(exclude,glob)**/.clover/**"


# Flags that keep a subcommand from running a diff program (textconv, external diff).
_NO_PROGRAMS = {"diff": ("--no-ext-diff", "--no-textconv"), "log": ("--no-ext-diff", "--no-textconv"),
                "show": ("--no-ext-diff", "--no-textconv"), "blame": ("--no-textconv",)}


def git_command(cwd: Path, args, env: dict | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for `git ARGS` in `cwd`, hardened (tools/githarden.py): no pager, no prompts,
    no fsmonitor, hooks, filters, diff or merge drivers, gpg or transport; the one place every git
    process Clover starts itself is built (fix, swebench, undo, repo map, branch name).
    GitConfigRefused when the repository's config includes a FIFO or another non-regular file
    (tools/gitincludes.py): git would wait on it forever."""
    check_includes(cwd)
    args = list(args)
    if args and args[0] in _NO_PROGRAMS:
        args[1:1] = _NO_PROGRAMS[args[0]]
    base = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    # the system config stays (an administrator's safe.directory); its drivers are overridden too
    base.update(GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", GIT_ASKPASS="true", GIT_EDITOR="true")
    full_env = githarden.hardened_env(cwd, {**base, **(env or {})})
    return ["git", "-c", "core.quotepath=off", *args], full_env


def git_run(root: Path, *args: str, env: dict | None = None, check: bool = False,
            text: bool = False, input: str | bytes | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run hardened `git ARGS` in `root` and capture its output (bytes unless `text`). When the
    hardening cannot be built (githarden.HardeningError) git is not run: the result is exit 128
    with the reason on stderr (CalledProcessError with `check`). Every call is bounded: `timeout`
    (default GIT_TIMEOUT) kills it and raises GitTimeout, one line."""
    try:
        argv, full_env = git_command(Path(root), args, env)
    except githarden.HardeningError as exc:
        why = f"clover: {exc}\n"
        res = subprocess.CompletedProcess(["git", *args], 128, "" if text else b"",
                                          why if text else why.encode())
        if check:
            raise subprocess.CalledProcessError(128, res.args, res.stdout, res.stderr)
        return res
    limit = GIT_TIMEOUT if timeout is None else timeout
    try:
        return subprocess.run(argv, cwd=root, env=full_env, input=input, capture_output=True,
                              check=check, text=text, timeout=limit,
                              **({} if input is not None else {"stdin": subprocess.DEVNULL}))
    except subprocess.TimeoutExpired:
        raise GitTimeout(f"git {args[0] if args else ''} did not finish within {limit:g} s") from None


def is_git_repo(root: Path) -> bool:
    """True when `root` is inside a git working tree."""
    if shutil.which("git") is None:
        return False
    res = git_run(Path(root), "rev-parse", "--is-inside-work-tree")
    return res.returncode == 0 and res.stdout.strip() == b"true"


def current_branch(root: Path) -> str | None:
    """The checked-out branch name; None outside git or on a detached HEAD."""
    if shutil.which("git") is None:
        return None
    try:
        res = git_run(Path(root), "symbolic-ref", "--quiet", "--short", "HEAD", timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    name = res.stdout.decode("utf-8", "replace").strip()
    return name if res.returncode == 0 and name else None


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
