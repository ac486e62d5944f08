"""Approval policy (DESIGN.md section 4): which tool calls run, which ask, which are refused.

Modes: ask (edits and shell need a yes), auto-edit (edits apply, shell asks), yolo (all run),
read-only (writing tools refused; shell only for allow-listed read-only commands).
"Always" answers are remembered per project in <root>/.clover/approvals.json, keyed by tool name
(writing tools) or by shell command prefix.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clover_cli.agent.prompt_files import observation
from clover_cli.agent.readonly import has_shell_operators, is_read_only_command
from clover_cli.tools.checkpoints import ensure_private_dir

__all__ = ["ApprovalPolicy", "ApprovalStore", "Decision", "command_prefix", "has_shell_operators",
           "is_read_only_command", "is_shell_tool", "prefix_matches"]

SHELL_TOOLS = ("shell", "bash", "run_shell", "run_command", "run_tests", "run_test")
_TWO_WORD = {"git", "npm", "pnpm", "yarn", "cargo", "go", "uv", "pip", "pip3", "make", "docker", "poetry",
             "npx", "bunx", "pipenv", "hatch", "tox", "nox", "just", "kubectl"}
# Programs that run another command or arbitrary code given on the command line: an "always" for
# them would allow anything, so it is never remembered (the answer applies to this call only).
WRAPPERS = {"bash", "sh", "zsh", "dash", "ksh", "fish", "env", "sudo", "doas", "su", "runuser", "timeout",
            "xargs", "nohup", "nice", "ionice", "stdbuf", "time", "command", "builtin", "exec", "eval",
            "setsid", "strace", "ltrace", "watch", "chroot", "flock", "script", "unbuffer", "parallel",
            "ssh", "firejail", "busybox"}
# Interpreters: remembered only with their script (`python tool.py`) or module (`python -m pytest`).
INTERPRETERS = re.compile(r"(python|pypy)[0-9.]*|node|nodejs|deno|bun|perl|ruby|php|lua|Rscript|tclsh")
# Two-word runners that run whatever follows: remembered with the wrapped command's prefix.
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("hatch", "run"), ("npm", "exec"),
            ("pnpm", "exec"), ("pnpm", "dlx"), ("yarn", "exec"), ("yarn", "dlx"), ("npx", ""), ("bunx", "")}
# Two-word forms that run anything inside a container or remote: never remembered.
_NEVER_TWO = {("docker", "run"), ("docker", "exec"), ("podman", "run"), ("podman", "exec"), ("kubectl", "exec")}
# git options before the subcommand; those in _GIT_VALUE take the next word as their value.
_GIT_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env",
              "--super-prefix", "--list-cmds", "--attr-source"}

Verdict = Literal["run", "ask", "refuse"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""  # why a call is refused (told to the model)
    always_key: str = ""  # what an "always" answer would remember ("" = nothing: the answer applies once)


def is_shell_tool(name: str, args: dict) -> bool:
    """A tool that runs an arbitrary command."""
    return name in SHELL_TOOLS or (name not in ("grep", "find_files") and isinstance(args.get("command"), str))


def _words(command: str) -> list[str] | None:
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _git_subcommand(words: list[str]) -> tuple[int, bool]:
    """(index of git's subcommand in words, whether only `-C DIR` / `--no-pager` came before it)."""
    i, plain = 1, True
    while i < len(words) and words[i].startswith("-"):
        w = words[i]
        if w in _GIT_VALUE:
            plain = plain and w == "-C"
            i += 2
        else:
            plain = plain and w in ("--no-pager", "-P")
            i += 1
    return i, plain


def _prefix_of(words: list[str]) -> str:
    if not words:
        return ""
    first = words[0]
    base = first.rsplit("/", 1)[-1]
    if "=" in first or base in WRAPPERS:  # VAR=x cmd, bash -c, timeout, sudo, ...: never remembered
        return ""
    if INTERPRETERS.fullmatch(base):
        if len(words) >= 3 and words[1] == "-m" and not words[2].startswith("-"):
            return " ".join(words[:3])
        if len(words) >= 2 and not words[1].startswith("-"):
            return " ".join(words[:2])  # the script
        return ""  # bare interpreter, -c CODE, -e CODE, options: never remembered
    if len(words) > 1 and (base, words[1]) in _NEVER_TWO:
        return ""
    if base == "git":
        i, _ = _git_subcommand(words)
        return f"git {words[i]}" if i < len(words) else ""
    for runner, sub in _RUNNERS:
        if base == runner and (sub == "" or (len(words) > 1 and words[1] == sub)):
            start = 1 if sub == "" else 2
            while start < len(words) and words[start].startswith("-"):
                start += 1  # runner options (values of options are not handled: then nothing matches)
            inner = _prefix_of(words[start:])
            return " ".join(words[:start] + [inner]) if inner else ""
    if base in _TWO_WORD and len(words) >= 2 and not words[1].startswith("-"):
        return " ".join(words[:2])
    return first


def command_prefix(command: str) -> str:
    """The prefix an "always" answer remembers: `pytest`, `git diff`, `python -m pytest`.

    "" when nothing safe can be remembered: wrappers (`bash -c`, `timeout`, `env`, `sudo`,
    `xargs`, ...), bare interpreters and inline code (`python -c`), commands with shell operators.
    git's global options are skipped (`git -C sub status` -> `git status`)."""
    words = _words(command)
    if words is None or has_shell_operators(command):
        return ""
    return _prefix_of(words)


def prefix_matches(command: str, prefix: str) -> bool:
    """True when `command`'s words start with `prefix`'s words and it has no shell operators.

    `git -C DIR` and `--no-pager` before the subcommand are ignored (`git -C sub diff` matches
    `git diff`); other git global options (`-c k=v`, `--git-dir`) never match."""
    if not prefix.strip() or has_shell_operators(command):
        return False
    words, want = _words(command), _words(prefix)
    if not words or not want:
        return False
    if words[0] == "git" and want[0] == "git" and len(want) > 1:
        i, plain = _git_subcommand(words)
        if not plain:
            return False
        words = ["git"] + words[i:]
    return words[:len(want)] == want


class ApprovalStore:
    """The per-project memory of "always" answers: <root>/.clover/approvals.json."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / ".clover" / "approvals.json"

    def load(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"tools": [], "commands": []}
        if not isinstance(data, dict):
            return {"tools": [], "commands": []}
        return {k: [str(x) for x in data.get(k, []) if isinstance(x, str)] for k in ("tools", "commands")}

    def remember(self, kind: Literal["tools", "commands"], key: str) -> None:
        """Adds a key and writes the file atomically."""
        data = self.load()
        if key not in data[kind]:
            data[kind].append(key)
        ensure_private_dir(self.path.parent.parent)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".approvals.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, self.path)


class ApprovalPolicy:
    """Decides per tool call: run, ask the user, or refuse."""

    def __init__(self, root: Path, mode: str, shell_allow: tuple[str, ...] = (),
                 is_writing=lambda name: False) -> None:
        self.mode = mode
        self.shell_allow = tuple(shell_allow)
        self.store = ApprovalStore(root)
        self._is_writing = is_writing

    def is_writing(self, name: str) -> bool:
        """True for tools that edit files."""
        return bool(self._is_writing(name))

    def decide(self, name: str, args: dict) -> Decision:
        """The verdict for one call in the current mode."""
        writing = self._is_writing(name)
        shell = not writing and is_shell_tool(name, args)
        if not writing and not shell:
            return Decision("run")
        command = str(args.get("command", "")) if shell else ""
        key = command_prefix(command) if shell else name
        if self.mode == "read-only":
            if shell and is_read_only_command(command):
                return Decision("run", always_key=key)
            reason = observation("read_only_shell") if shell else observation("read_only_tool", name=name)
            return Decision("refuse", reason, key)
        if self.mode == "yolo":
            return Decision("run", always_key=key)
        remembered = self.store.load()
        if writing:
            if self.mode == "auto-edit" or name in remembered["tools"]:
                return Decision("run", always_key=key)
            return Decision("ask", always_key=key)
        # entries too broad to be safe (an old file's `git`, `bash`) are ignored
        allowed = self.shell_allow + tuple(c for c in remembered["commands"] if command_prefix(c) == c)
        if any(prefix_matches(command, p) for p in allowed):
            return Decision("run", always_key=key)
        return Decision("ask", always_key=key)

    def remember(self, name: str, args: dict, key: str) -> None:
        """Stores an "always" answer for this kind of call (nothing when `key` is "")."""
        if not key.strip():
            return
        writing = self._is_writing(name)
        kind = "commands" if (not writing and is_shell_tool(name, args)) else "tools"
        self.store.remember(kind, key)
