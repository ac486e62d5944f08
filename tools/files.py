"""Which files a repository has: git's view inside git (.gitignore honoured), a walk with
sensible ignores outside. Shared by list_files, grep and repo_map."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .gitignore import GitIgnores, heavy_ignores
from .gitutil import git_run, is_git_repo
from .paths import PRIVATE_DIR
from .walk import walk

DEFAULT_IGNORES = {".git", PRIVATE_DIR, "node_modules", "__pycache__", ".venv", "venv", ".tox",
                   ".mypy_cache", ".pytest_cache", ".ruff_cache", ".idea", ".vscode", "dist",
                   "build", ".eggs", ".hg", ".svn"}
IGNORED_SUFFIXES = (".egg-info", ".pyc", ".pyo", ".so", ".o")


def repo_files(root: Path, sub: Path | None = None) -> list[str]:
    """Sorted repo-relative POSIX paths of the files under `sub` (default: the whole root)."""
    root = Path(root).resolve()
    sub = (sub or root).resolve()
    if is_git_repo(root):
        heavy = heavy_ignores(root)  # past a budget git is not handed the ignore files (gitignore.py)
        files = _git_files(root, sub, others=not heavy)
        if heavy:  # the untracked files by the bounded walk
            files = list(dict.fromkeys(files + _walk_files(root, sub)))
    else:
        files = _walk_files(root, sub)
    base = str(root)
    return sorted(f for f in files if not _private(f) and regular_inside(base, base + "/" + f))


def regular_inside(root: str, full: str) -> bool:
    """Whether `full` is a regular file whose real path stays inside `root` (a resolved path)
    and outside Clover's private dir: symlinks that leave the root, dangling links, FIFOs,
    sockets and devices are never listed, searched or mapped."""
    try:
        st = os.lstat(full)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(full)
        if not real.startswith(root + os.sep) or _private(real[len(root) + 1:]):
            return False
        try:
            st = os.stat(real)
        except OSError:
            return False
    return stat.S_ISREG(st.st_mode)


def _private(rel: str) -> bool:
    return rel == PRIVATE_DIR or rel.startswith(PRIVATE_DIR + "/") or f"/{PRIVATE_DIR}/" in rel


def _git_files(root: Path, sub: Path, others: bool = True) -> list[str]:
    res = git_run(sub, "ls-files", "-z", "--cached", *(("--others", "--exclude-standard") if others else ()),
                  "--full-name", "--", ".")
    top = os.path.realpath(git_run(root, "rev-parse", "--show-toplevel").stdout.decode().strip())
    base = str(root)
    if top == base:
        strip = 0
    elif base.startswith(top + os.sep):
        strip = len(base) - len(top)  # root is a subdirectory: names carry its prefix
    else:
        return []
    prefix = base[len(top) + 1:] + "/" if strip else ""
    out = []
    for name in dict.fromkeys(res.stdout.decode("utf-8", "replace").split("\0")):
        if not name or not name.startswith(prefix):
            continue
        out.append(name[len(prefix):])  # deleted, non-regular and escaping: repo_files filters
    return out


def _walk_files(root: Path, sub: Path) -> list[str]:
    rules = GitIgnores(root)  # every .gitignore from the root down (tools/gitignore.py)
    out = []
    for dirpath, dirnames, filenames in walk(sub):  # iterative (tools/walk.py)
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        rules.enter(rel_dir)
        dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_IGNORES
                             and not d.endswith(IGNORED_SUFFIXES) and not rules.ignored(rel_dir + d, True))
        for name in filenames:
            rel = rel_dir + name
            if not name.endswith(IGNORED_SUFFIXES) and not rules.ignored(rel, False):
                out.append(rel)
    return out


class GlobError(ValueError):
    """A glob that cannot be read (`[z-a].py`); str() is one line for the model."""


SUGGEST_MAX = 3
SUGGEST_SCAN_LIMIT = 20_000  # paths compared for a suggestion (the listing is list_files' own;
# difflib's cost grows with the candidates, so a huge tree's error stays quick)


def not_found_message(root: Path, path: str | None, *, kind: str = "file") -> str:
    """"PATH does not exist." plus up to three close repository paths ("Did you mean ...?") of a
    kind: "file", "dir" or "any". A model that mistyped a name (`shop/priding.py` for
    `shop/prices.py`) can retry with the right one; a person sees the likely intent."""
    import difflib

    message = f"{path} does not exist."
    wanted = (path or "").strip().strip("/").replace("\\", "/")
    if not wanted:
        return message
    try:
        files = repo_files(root)[:SUGGEST_SCAN_LIMIT]
    except OSError:
        return message
    folders = sorted({p for f in files for p in _parents(f)})
    candidates = {"file": files, "dir": folders}.get(kind, files + folders)
    # the closest whole paths first, then files whose name alone is close (a right name in the
    # wrong directory)
    close = difflib.get_close_matches(wanted, candidates, n=SUGGEST_MAX, cutoff=0.75)
    if len(close) < SUGGEST_MAX and kind != "dir":
        name = wanted.rsplit("/", 1)[-1]
        by_name: dict[str, list[str]] = {}
        for f in candidates:
            by_name.setdefault(f.rsplit("/", 1)[-1], []).append(f)
        for match in difflib.get_close_matches(name, list(by_name), n=SUGGEST_MAX, cutoff=0.8):
            close += [f for f in by_name[match] if f not in close]
    close = close[:SUGGEST_MAX]
    if not close:
        return message
    return message + " Did you mean " + " or ".join(close) + "?"


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
