"""Approval policy (DESIGN.md section 4): which tool calls run, which ask, which are refused.

Modes: ask (edits and shell need a yes), auto-edit (edits apply, shell asks), yolo (all run),
read-only (writing tools refused; shell only for allow-listed read-only commands).
"Always" answers are remembered per project in <root>/.clover/approvals.json, keyed by tool name
(writing tools) or by shell command prefix.
"""
from __future__ import annotations

import json
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clover_cli.agent.prompt_files import observation

from clover_cli.tools.checkpoints import ensure_private_dir

SHELL_TOOLS = ("shell", "bash", "run_shell", "run_command", "run_tests", "run_test")
# Commands that only read (read-only mode); a command qualifies when it starts with one of these.
READ_ONLY_COMMANDS = (
    "ls", "cat", "head", "tail", "wc", "pwd", "grep", "rg", "find", "tree", "file", "stat", "du",
    "echo", "which", "diff", "git status", "git diff", "git log", "git show", "git blame",
    "git branch", "git ls-files", "git grep", "git rev-parse",
)
_UNSAFE_FIND = ("-exec", "-execdir", "-delete", "-ok", "-fprint", "-fls")
_SHELL_OPERATORS = (";", "&", "|", ">", "<", "`", "$(", "\n")
_TWO_WORD = {"git", "python", "python3", "npm", "pnpm", "yarn", "cargo", "go", "uv", "pip", "make",
             "docker", "poetry", "npx", "node"}

Verdict = Literal["run", "ask", "refuse"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""  # why a call is refused (told to the model)
    always_key: str = ""  # what an "always" answer would remember


def is_shell_tool(name: str, args: dict) -> bool:
    """A tool that runs an arbitrary command."""
    return name in SHELL_TOOLS or (name not in ("grep", "find_files") and isinstance(args.get("command"), str))


def has_shell_operators(command: str) -> bool:
    """Chaining, pipes, redirections or substitutions: such commands never match a prefix rule."""
    return any(op in command for op in _SHELL_OPERATORS)


def command_prefix(command: str) -> str:
    """The prefix an "always" answer remembers: `pytest`, `git diff`, `python -m pytest`."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return ""
    if words[0] in ("python", "python3") and len(words) >= 3 and words[1] == "-m":
        return " ".join(words[:3])
    if words[0] in _TWO_WORD and len(words) >= 2 and not words[1].startswith("-"):
        return " ".join(words[:2])
    return words[0]


def prefix_matches(command: str, prefix: str) -> bool:
    """True when `command` is `prefix` or starts with it followed by whitespace, with no operators."""
    command = command.strip()
    if not prefix or has_shell_operators(command):
        return False
    return command == prefix or (command.startswith(prefix) and command[len(prefix)].isspace())


def is_read_only_command(command: str) -> bool:
    """Allowed in read-only mode: on the read-only list, no operators, no find actions."""
    if has_shell_operators(command):
        return False
    if any(flag in command.split() for flag in _UNSAFE_FIND):
        return False
    return any(prefix_matches(command, p) for p in READ_ONLY_COMMANDS)


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
        allowed = self.shell_allow + tuple(remembered["commands"])
        if any(prefix_matches(command, p) for p in allowed):
            return Decision("run", always_key=key)
        return Decision("ask", always_key=key)

    def remember(self, name: str, args: dict, key: str) -> None:
        """Stores an "always" answer for this kind of call."""
        writing = self._is_writing(name)
        kind = "commands" if (not writing and is_shell_tool(name, args)) else "tools"
        self.store.remember(kind, key)
