"""The read-only shell allow list (approval mode `read-only`).

A strict allow list, not prefix matching: the command must be one of the programs below (by its
bare name), git only with the listed subcommands, and no argument may be a flag that writes a
file, runs a program or changes state (`find -exec/-delete/-fprint*`, `--output=FILE`,
`rg --pre CMD`, `git grep -O CMD`, `tree -o FILE`, `file -C`, `git branch -D`, ...). Long options
are also refused in any abbreviation GNU getopt or git would accept (`--out=F` is `--output=F`).
When a command is not clearly read-only it is refused. Shell operators, redirections,
substitutions and variable expansions are refused before any of this (see `has_shell_operators`),
and for the programs that have dangerous flags also unquoted globs and brace lists, which bash
would expand into arguments never checked here (wildcard injection by a file named `-delete`).

Given the repository root, no argument may name a path outside it (`cat /etc/passwd`, `../x`,
`--file=/x`, `~/.ssh`, a symlink leading out), flags that follow symlinks during a recursive walk
are refused, and git may not work inside a nested repository (its config could run programs).
This list is what guards read-only mode where no OS sandbox is available (tools/sandbox.py).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from clover_cli.agent.shellwords import MAX_COMMAND_CHARS, git_target, outside_word

_SHELL_OPERATORS = (";", "&", "|", ">", "<", "`", "$(", "\n", "\r")


@dataclass(frozen=True)
class Rule:
    """What one program may be given."""

    deny_long: tuple[str, ...] = ()  # long option names (without --) that are refused
    deny_short: str = ""  # short option letters refused anywhere in a bundle (-abc)
    abbrev: bool = True  # the program accepts unique abbreviations of long options


_ABBREV_OFF = False
PROGRAMS: dict[str, Rule] = {
    "ls": Rule(), "cat": Rule(), "head": Rule(), "tail": Rule(), "wc": Rule(), "pwd": Rule(),
    "stat": Rule(), "du": Rule(), "echo": Rule(), "which": Rule(),
    # flags that read through symlinks met during a recursive walk (a link may lead outside)
    "diff": Rule(deny_long=("recursive",), deny_short="r"),
    "grep": Rule(deny_long=("dereference-recursive",), deny_short="R"),
    "rg": Rule(deny_long=("pre", "pre-glob", "hostname-bin", "follow"), deny_short="L", abbrev=_ABBREV_OFF),
    "tree": Rule(deny_long=("output",), deny_short="oRl"),  # -R writes 00Tree.html files
    "file": Rule(deny_long=("compile", "dereference"), deny_short="CL"),
    "find": Rule(),  # actions are checked by _find_ok
}
# git: allowed subcommands. The rule applies to every argument after the subcommand.
_GIT_DIFF_LIKE = Rule(deny_long=("output", "ext-diff", "open-files-in-pager"), deny_short="O")
GIT_SUBCOMMANDS: dict[str, Rule] = {
    name: _GIT_DIFF_LIKE for name in ("status", "diff", "log", "show", "blame", "ls-files", "ls-tree",
                                      "grep", "rev-parse", "describe", "shortlog", "cat-file")
}
# git subcommands that also change state: only their listing forms are allowed (_git_listing_ok).
GIT_LISTING = ("branch", "tag", "remote", "stash", "config")
_FIND_ACTIONS = ("exec", "execdir", "ok", "okdir", "delete", "fprint", "fprint0", "fprintf", "fls", "follow")
_RISKY = ("git", "find", "rg", "tree", "file")  # programs with flags that write or run something
_FIND_RE = re.compile(r"-(exec|ok|delete|fprint|fls)", re.IGNORECASE)


def has_shell_operators(command: str) -> bool:
    """Chaining, pipes, redirections or substitutions."""
    return any(op in command for op in _SHELL_OPERATORS)


def _has_expansion(command: str) -> bool:
    """`$VAR`, `${...}`, `$'...'`/`$"..."` (quoting that can hide a flag): any `$` not ending a word."""
    return re.search(r"""\$(?!\s|$|['"](?:\s|$))""", command) is not None


def unquoted_chars(command: str) -> set[str]:
    """The characters of `command` that bash sees outside quotes and backslash escapes."""
    seen: set[str] = set()
    quote, escaped = "", False
    for ch in command:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        else:
            seen.add(ch)
    return seen


def _expands(command: str) -> bool:
    """Globs and brace lists that bash would expand into words we never saw (a file named
    `--output=x` in the repository turns `git diff *` into `git diff --output=x ...`)."""
    bare = unquoted_chars(command)
    if bare & set("*?["):
        return True
    return "{" in bare and re.search(r"\{[^}]*(,|\.\.)[^}]*\}", command) is not None


def _long_denied(word: str, rule: Rule) -> bool:
    name = word[2:].split("=", 1)[0].lower()
    for bad in rule.deny_long:
        if name == bad or name.startswith(bad + "-"):
            return True
        if rule.abbrev and name and bad.startswith(name):  # an abbreviation of a refused option
            return True
    return False


def _args_ok(args: list[str], rule: Rule) -> bool:
    for word in args:
        if word.startswith("--") and len(word) > 2 and _long_denied(word, rule):
            return False
        if word.startswith("-") and not word.startswith("--") and any(c in rule.deny_short for c in word[1:]):
            return False
    return True


def _find_ok(args: list[str]) -> bool:
    if any(w in ("-L", "-H") for w in args):  # follow symlinks
        return False
    for word in args:
        name = word.lstrip("-").lower()
        if word.startswith("-") and any(name.startswith(a) for a in _FIND_ACTIONS):
            return False
    return True


# Listing flags of the state-changing git subcommands; flags in _VALUE take a value.
_LIST_FLAGS = {
    "branch": {"-a", "-r", "-v", "-vv", "-l", "--list", "--all", "--remotes", "--verbose", "--show-current",
               "--no-color", "--color", "--no-column", "-i", "--ignore-case"},
    "tag": {"-l", "--list", "--no-column", "-i", "--ignore-case"},
}
_VALUE = {"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"}


def _listing_flags_ok(sub: str, args: list[str]) -> bool:
    """git branch / git tag: only listing flags; patterns only together with -l/--list."""
    listing = any(a in ("-l", "--list") for a in args)
    i = 0
    while i < len(args):
        a = args[i]
        if a in _VALUE:
            i += 2
            continue
        if a.split("=", 1)[0] in _VALUE and "=" in a:
            pass
        elif sub == "tag" and re.fullmatch(r"-n\d*", a):
            pass
        elif a.startswith("-"):
            if a not in _LIST_FLAGS[sub]:
                return False
        elif not listing:  # `git branch NAME` / `git tag NAME` would create one
            return False
        i += 1
    return True


def _git_listing_ok(sub: str, args: list[str]) -> bool:
    if sub in ("branch", "tag"):
        return _listing_flags_ok(sub, args)
    if sub == "remote":
        return (args in ([], ["-v"], ["--verbose"])
                or (len(args) >= 2 and args[0] == "get-url" and all(a in ("--push", "--all") for a in args[1:-1])
                    and not args[-1].startswith("-")))
    if sub == "stash":  # bare `git stash` pushes; only list / show
        return bool(args) and args[0] in ("list", "show") and _args_ok(args[1:], _GIT_DIFF_LIKE)
    if sub == "config":
        scopes = {"--global", "--local", "--system", "--show-origin", "--show-scope", "--name-only",
                  "-z", "--null", "--includes"}
        flags = [a for a in args if a.startswith("-")]
        positional = [a for a in args if not a.startswith("-")]
        if all(a in scopes | {"-l", "--list"} for a in flags) and any(a in ("-l", "--list") for a in flags):
            return not positional
        getters = [a for a in flags if a in ("--get", "--get-all", "--get-regexp")]
        return (len(getters) == 1 and all(a in scopes | set(getters) for a in flags)
                and 1 <= len(positional) <= 2)
    return False


def _git_ok(args: list[str]) -> bool:
    i = 0
    while i < len(args) and args[i].startswith("-"):  # global options: only -C DIR and --no-pager
        if args[i] == "-C" and i + 1 < len(args):
            i += 2
        elif args[i] in ("--no-pager", "-P"):
            i += 1
        else:
            return False  # -c k=v, --git-dir, --exec-path, ... can run programs
    if i >= len(args):
        return False
    sub, rest = args[i], args[i + 1:]
    if sub in GIT_SUBCOMMANDS:
        return _args_ok(rest, GIT_SUBCOMMANDS[sub])
    if sub in GIT_LISTING:
        return _git_listing_ok(sub, rest)
    return False


_GLOB_OK = ("ls", "du", "stat", "echo", "which", "pwd")  # they show names and sizes, never content
_TILDE = re.compile(r"(^|[\s=:])~")


def is_read_only_command(command: str, root: Path | str | None = None) -> bool:
    """True only for commands that clearly just read (see the module docstring); with `root`,
    also only inside it."""
    if len(command) > MAX_COMMAND_CHARS or has_shell_operators(command) or _has_expansion(command) \
            or _TILDE.search(command):
        return False
    if root is not None and not _inside_root(command, root):
        return False
    return _allowed(command)


def _inside_root(command: str, root: Path | str) -> bool:
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words or outside_word(root, words[1:]) is not None:
        return False
    if words[0] not in _GLOB_OK and _expands(command):  # a glob may match a symlink leading out
        return False
    return words[0] != "git" or git_target(root, words[1:]) is not None


def _allowed(command: str) -> bool:
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words:
        return False
    program, args = words[0], words[1:]
    if program in _RISKY and _expands(command):  # the others have no flag that writes or runs
        return False
    if program == "git":
        return _git_ok(args)
    rule = PROGRAMS.get(program)
    if rule is None:
        return False
    if program == "find":  # also on the raw text: quoting must not hide an action
        return _find_ok(args) and not _FIND_RE.search(command)
    return _args_ok(args, rule)
