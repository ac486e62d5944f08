"""Shell command text to argv, and the checks approval rules share (docs/security.md, "Shell sandbox").

`plain_argv` accepts only commands that bash would run exactly as the words we see: no variable,
tilde or brace expansion, no command or process substitution, no redirection, pipe, list or
compound command, no glob, comment, escape or newline. Anything else is None, and no approval rule
matches it (the user is asked, or read-only mode refuses it). Quotes are fine: a quoted word is one
word. This is the "refuse what you cannot see" form of parsing, rather than a full bash grammar.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

# Characters that make bash do more than split words: expansions, substitutions, redirections,
# lists, pipes, subshells, groups, globs, comments, escapes, history, line breaks.
_SPECIAL = set("$`;|&<>(){}*?[]#\\!\n\r\x00")
_TILDE = re.compile(r"(^|[\s=:])~")
MAX_COMMAND_CHARS = 16384  # longer commands match no rule (parsing them is not worth the time)
PATH_MAX = 4096


def plain_argv(command: str) -> list[str] | None:
    """The argv of a plain command, or None when bash would interpret anything beyond quoting."""
    if not command or len(command) > MAX_COMMAND_CHARS or any(ch in _SPECIAL for ch in command) \
            or _TILDE.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0] or any(w == "" for w in words):
        return None  # `VAR=x cmd` runs cmd with a changed environment
    return words


def _path_candidates(word: str) -> list[str]:
    """The parts of an argument that a program might open as a path."""
    out = [word]
    if word.startswith("-"):
        if "=" in word:
            out.append(word.split("=", 1)[1])
        if not word.startswith("--") and len(word) > 2:
            out.append(word[2:])  # -fFILE
    return out


def inside(root: Path | str, path: str) -> bool:
    """Whether `path` (relative to root, or absolute) resolves inside the root (symlinks followed)."""
    real_root = os.path.realpath(os.fspath(root))
    if path.startswith("~") or "\x00" in path or len(path) > PATH_MAX:
        return False
    full = path if os.path.isabs(path) else os.path.join(real_root, path)
    try:
        real = os.path.realpath(full)
    except (OSError, ValueError):
        return False
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def outside_word(root: Path | str, args: list[str]) -> str | None:
    """The first argument that names a path outside the repository (`/etc/passwd`, `../x`,
    `--file=/x`, a symlink leading out), or None."""
    for word in args:
        for cand in _path_candidates(word):
            if cand and cand not in ("-", "--") and not inside(root, cand):
                return word
    return None


def git_target(root: Path | str, args: list[str]) -> str | None:
    """The folder a `git ARGS` command works in (after its `-C DIR` options), or None when that
    is outside the root or inside a nested repository (a `.git` folder or `gitdir:` file in any
    folder below the root down to the target): its config could run programs (core.fsmonitor)."""
    real_root = os.path.realpath(os.fspath(root))
    target, i = real_root, 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "-C" and i + 1 < len(args):
            if not inside(real_root, os.path.join(target, args[i + 1])):
                return None
            target = os.path.realpath(os.path.join(target, args[i + 1]))
            i += 2
        else:
            i += 1
    if not inside(real_root, target):
        return None
    probe = target
    while probe != real_root and inside(real_root, probe):
        if os.path.lexists(os.path.join(probe, ".git")):
            return None
        probe = os.path.dirname(probe)
    return target
