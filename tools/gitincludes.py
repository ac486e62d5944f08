"""Refuse a repository whose git config would make git block: `.git/config` (or a file it
includes) that is not a regular file, or an `[include]`/`[includeIf]` `path` naming a FIFO,
a device, a socket or a folder. git opens such a path and waits on it forever (a FIFO with no
writer), so no git process is started for that repository (docs/tools.md, "Bounds").

Only the repository's own config files are read (they come with an untrusted checkout): the
user's global and system files are theirs. Standard library only.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

MAX_FILES = 20          # config files followed through includes
MAX_BYTES = 1 << 20     # read of each config file
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"(?:[^"\\]|\\.)*")?\s*\]')
_PATH = re.compile(r'^\s*path\s*=\s*(.*?)\s*$', re.IGNORECASE)


class GitConfigRefused(OSError):
    """The repository's git config names something git would block on; git is not run."""


def git_dir(cwd: Path | str) -> str | None:
    """The git directory of the repository holding `cwd` (a `.git` folder or the target of a
    `gitdir:` file), or None."""
    here = os.path.realpath(cwd)
    while True:
        dot = os.path.join(here, ".git")
        if os.path.isdir(dot):
            return dot
        if os.path.isfile(dot):
            try:
                with open(dot, "rb") as fh:
                    first = fh.read(4096).decode("utf-8", "replace").splitlines()[:1]
            except OSError:
                return None
            if first and first[0].startswith("gitdir:"):
                return os.path.realpath(os.path.join(here, first[0][7:].strip()))
            return None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _included(config: str, text: str) -> list[str]:
    """The paths the `[include]`/`[includeIf ...]` sections of one config file name."""
    out, section = [], ""
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            line = line[header.end():]
        m = _PATH.match(line) if section in ("include", "includeif") else None
        if not m:
            continue
        value = m.group(1).split(" #")[0].split(" ;")[0].strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if value:
            value = os.path.expanduser(value)
            out.append(value if os.path.isabs(value) else os.path.join(os.path.dirname(config), value))
    return out


def check_includes(cwd: Path | str) -> None:
    """Raise GitConfigRefused when the config of the repository at `cwd` is, or includes,
    something that is not a regular file (an include that does not exist is fine: git skips it)."""
    gdir = git_dir(cwd)
    if gdir is None:
        return
    todo = [os.path.join(gdir, "config"), os.path.join(gdir, "config.worktree")]
    common = os.path.join(gdir, "commondir")
    if os.path.isfile(common):
        try:
            with open(common, "rb") as fh:
                rel = fh.read(4096).decode("utf-8", "replace").strip()
            todo.append(os.path.join(os.path.realpath(os.path.join(gdir, rel)), "config"))
        except OSError:
            pass
    seen: set[str] = set()
    while todo and len(seen) < MAX_FILES:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            st = os.stat(path)
        except OSError:
            continue  # absent (or unreadable): git skips a missing include too
        if not stat.S_ISREG(st.st_mode):
            shown = os.path.relpath(path, os.path.dirname(gdir)) if path.startswith(os.path.dirname(gdir)) else path
            raise GitConfigRefused(f"the repository's git config names {shown}, which is {_kind(st.st_mode)}, "
                                   "not a regular file; git is not run here")
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        todo += _included(path, text)
