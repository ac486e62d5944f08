"""Where Clover keeps its own state for a repository: outside the repository, in the user's dirs.

A repository is untrusted content (docs/security.md): nothing Clover *reads back* as its own state
(sessions, approvals, the checkpoint index, caches, prompt history) may live inside it, or a cloned
repository could ship it. Each repository gets one folder per kind, keyed by its real path:

    $XDG_STATE_HOME/clover/repos/<name>-<hash>/   sessions, checkpoints, approvals, history
    $XDG_CACHE_HOME/clover/repos/<name>-<hash>/   rebuildable caches (the repo map)
    $XDG_CONFIG_HOME/clover/                      the user's own files (config.toml, trusted.json,
                                                  tui.json): config_home(), the one place it is resolved

`<hash>` is the first 16 hex digits of sha256 of the resolved root, so two clones never share
state and a symlinked path reaches the same folder as the real one. `<name>` is the root's base
name, sanitised, only so that a person can find the folder. Folders are created 0700.

Only the standard library is imported here, so every layer may use it (tools import nothing of ours).

Why not `platformdirs` (installed here through textual): on Linux it gives these same three
folders, XDG variables and their relative-value rule included (tests/tools/test_statedir.py
compares them), so it gains nothing there. On macOS it would move a user's files to
`~/Library/Application Support/clover` and put config and state in that one folder (its
`user_state_dir` is its `user_config_dir`), while the trust list and config must stay apart from
per-repository state. And it costs start-up time: imported after `clover_cli.cli`, platformdirs
took 9-48 ms (min-median of 9 runs, `python -X importtime`, this 2-core machine under load; it
pulls in tempfile, shutil and random), this module 0.5-0.6 ms. `clover --help` imports neither.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

__all__ = ["config_home", "state_home", "cache_home", "repo_key", "repo_state_dir", "repo_cache_dir",
           "state_folder_problem"]


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var, "")
    # The XDG spec: a relative value is invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / default


def config_home() -> Path:
    """`$XDG_CONFIG_HOME/clover` (default `~/.config/clover`): the user's config, trust list and
    TUI preferences; never anything a repository provides."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "clover"


def state_home() -> Path:
    """`$XDG_STATE_HOME/clover` (default `~/.local/state/clover`)."""
    return _xdg("XDG_STATE_HOME", ".local/state") / "clover"


def cache_home() -> Path:
    """`$XDG_CACHE_HOME/clover` (default `~/.cache/clover`)."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "clover"


def repo_key(root: Path | str) -> str:
    """`<name>-<hash16>` for the repository at `root` (resolved, so symlinks agree)."""
    real = os.path.realpath(os.fspath(root))
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(real) or "root")[:40].lstrip(".") or "root"
    return f"{name}-{digest}"


def _private(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def repo_state_dir(root: Path | str, *parts: str, create: bool = True) -> Path:
    """The repository's state folder (or a subfolder of it), created 0700 unless `create=False`."""
    path = state_home().joinpath("repos", repo_key(root), *parts)
    return _private(path) if create else path


def repo_cache_dir(root: Path | str, *parts: str, create: bool = True) -> Path:
    """The repository's cache folder (or a subfolder of it), created 0700 unless `create=False`."""
    path = cache_home().joinpath("repos", repo_key(root), *parts)
    return _private(path) if create else path


def state_folder_problem(path: Path | str) -> str | None:
    """Why the folder `path` cannot exist, in words, when a path on the way to it is something
    other than a folder (`/home/u/.local/state/clover is a file, not a folder`); None otherwise."""
    path = Path(path)
    for part in [path, *path.parents]:
        try:
            mode = os.stat(part).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return f"{part}: {exc.strerror or exc}"
        if stat.S_ISDIR(mode):
            return None
        what = "a file" if stat.S_ISREG(mode) else "not a folder"
        return f"{part} is {what}, not a folder; move it aside and Clover creates the folder"
    return None
