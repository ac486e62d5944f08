"""Approval policy (docs/design.md, approvals): which tool calls run, which ask, which are refused.

Modes, each allowing at least what the one before allows (APPROVAL_ORDER): read-only (writing
tools refused; shell only for the allow list of provably read-only commands, readonly.py), ask
(edits and other shell commands need a yes), auto-edit (edits apply, other shell commands ask),
yolo (all run). The allow list's commands run without asking in every mode, in read-only mode's
sandbox (Decision.sandbox). The mode picks the shell's OS sandbox for other commands
(tools/sandbox.py): read-only mode's is a read-only bubblewrap sandbox (secrets hidden, no
network), ask's and auto-edit's the workspace one; where no sandbox is available the allow list
also refuses any argument naming a path outside the repository.

Shell rules (`--shell-allow` and "always" answers) match parsed commands, never raw prefixes: a
rule is an argv shape, `PROGRAM [SUBCOMMAND] [OPTION...]` (`pytest -q`, `git diff --stat`,
`python -m pytest -x`). A command matches when it is a plain command (shellwords.plain_argv: no
expansion, substitution, redirection, compound or glob), its program and subcommand (git's `-C DIR`
included) are the rule's, every option it passes is one the rule names (`--output=x` is not
`--stat`), and none of its arguments names a path outside the repository; a git command must not
work inside a nested repository. "Always" remembers the command's own shape (its options, not
its file arguments); options that run programs or write files are never remembered.
Answers are kept per repository in the user's state folder (tools.statedir: approvals.json),
never in the repository (a cloned repository could ship one).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clover_cli.agent.prompt_files import observation
from clover_cli.agent.readonly import has_shell_operators, is_read_only_command
from clover_cli.agent.shellwords import git_target, outside_word, plain_argv
from clover_cli.tools import sandbox
from clover_cli.tools.statedir import repo_state_dir

__all__ = ["ApprovalPolicy", "ApprovalStore", "Decision", "command_rule", "has_shell_operators",
           "is_read_only_command", "is_shell_tool", "rule_matches"]

log = logging.getLogger("clover.approvals")
SHELL_TOOLS = ("shell", "bash", "run_shell", "run_command", "run_tests", "run_test")
_TWO_WORD = {"git", "npm", "pnpm", "yarn", "cargo", "go", "uv", "pip", "pip3", "make", "docker", "poetry",
             "npx", "bunx", "pipenv", "hatch", "tox", "nox", "just", "kubectl"}
# Programs that run another command or arbitrary code given on the command line: an "always" for
# them would allow anything, so it is never remembered (the answer applies to this call only).
WRAPPERS = {"bash", "sh", "zsh", "dash", "ksh", "fish", "env", "sudo", "doas", "su", "runuser", "timeout",
            "xargs", "nohup", "nice", "ionice", "stdbuf", "time", "command", "builtin", "exec", "eval",
            "setsid", "strace", "ltrace", "watch", "chroot", "flock", "script", "unbuffer", "parallel",
            "ssh", "firejail", "busybox", "bwrap", "unshare", "nsenter", "source", "."}
# Interpreters: remembered only with their script (`python tool.py`) or module (`python -m pytest`).
INTERPRETERS = re.compile(r"(python|pypy)[0-9.]*|node|nodejs|deno|bun|perl|ruby|php|lua|Rscript|tclsh")
# Two-word runners that run whatever follows: remembered with the wrapped command's shape.
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("hatch", "run"), ("npm", "exec"),
            ("pnpm", "exec"), ("pnpm", "dlx"), ("yarn", "exec"), ("yarn", "dlx"), ("npx", ""), ("bunx", "")}
# Two-word forms that run anything inside a container or remote: never remembered.
_NEVER_TWO = {("docker", "run"), ("docker", "exec"), ("podman", "run"), ("podman", "exec"), ("kubectl", "exec")}
# Options (any program) that write files or run programs: a command using them is never remembered.
_RISKY_LONG = ("output", "output-directory", "pre", "pre-glob", "open-files-in-pager", "eval", "exec",
               "execdir", "ok", "okdir", "delete", "fprint", "fprint0", "fprintf", "fls", "ext-diff",
               "upload-pack", "receive-pack", "exec-path", "config-env", "git-dir", "work-tree",
               "to-command", "use-compress-program", "rsh", "checkpoint-action", "command", "hostname-bin")
_RISKY_SHORT = {"git": "Oc", "tree": "oR", "file": "C", "make": "E"}
_EMPTY = {"tools": [], "commands": []}

Verdict = Literal["run", "ask", "refuse"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""  # why a call is refused (told to the model)
    always_key: str = ""  # what an "always" answer would remember ("" = nothing: the answer applies once)
    sandbox: str = ""  # the shell sandbox profile the call runs under ("" = the mode's own)


def is_shell_tool(name: str, args: dict) -> bool:
    """A tool that runs an arbitrary command."""
    return name in SHELL_TOOLS or (name not in ("grep", "find_files") and isinstance(args.get("command"), str))


def _prefix_len(words: list[str]) -> int | None:
    """How many leading words name the program (and its subcommand, script or module); None when
    no rule may cover the command (wrappers, inline code, git options that run programs)."""
    if not words:
        return None
    base = words[0].rsplit("/", 1)[-1]
    if base in WRAPPERS:
        return None
    if INTERPRETERS.fullmatch(base):
        if len(words) >= 3 and words[1] == "-m" and not words[2].startswith("-"):
            return 3
        return 2 if len(words) >= 2 and not words[1].startswith("-") else None
    if len(words) > 1 and (base, words[1]) in _NEVER_TWO:
        return None
    if base == "git":
        i = 1
        while i < len(words) and words[i].startswith("-"):
            if words[i] == "-C" and i + 1 < len(words):
                i += 2
            elif words[i] in ("--no-pager", "-P"):
                i += 1
            else:
                return None  # -c k=v, --git-dir, --exec-path, --config-env, ...
        return i + 1 if i < len(words) else None
    for runner, sub in _RUNNERS:
        if base == runner and (sub == "" or (len(words) > 1 and words[1] == sub)):
            start = 1 if sub == "" else 2
            inner = _prefix_len(words[start:]) if start < len(words) and not words[start].startswith("-") else None
            return None if inner is None else start + inner
    if base in _TWO_WORD and len(words) >= 2 and not words[1].startswith("-"):
        return 2
    return 1


def _risky_option(program: str, word: str) -> bool:
    if not word.startswith("-") or word in ("-", "--"):
        return False
    name = word.lstrip("-").split("=", 1)[0].lower()
    if any(name == bad or (len(name) >= 3 and bad.startswith(name)) for bad in _RISKY_LONG):
        return True
    short = _RISKY_SHORT.get(program.rsplit("/", 1)[-1], "")
    return not word.startswith("--") and any(c in short for c in word[1:].split("=", 1)[0])


def command_rule(command: str) -> str:
    """The rule an "always" answer remembers for `command`: its program and subcommand plus the
    options it used, sorted (`pytest -q tests/x.py` -> `pytest -q`, `git diff --stat HEAD` ->
    `git diff --stat`). "" when nothing safe can be remembered (the answer applies once)."""
    words = plain_argv(command)
    n = _prefix_len(words) if words else None
    if words is None or n is None:
        return ""
    options = sorted({w for w in words[n:] if w.startswith("-") and w not in ("-", "--")})
    if any(_risky_option(words[0], w) for w in options):
        return ""
    return shlex.join(words[:n] + options)


def rule_matches(command: str, rule: str, root: Path | str | None = None) -> bool:
    """Whether `command` is covered by `rule` (see the module docstring). With `root`, arguments
    naming paths outside it, and git commands inside a nested repository, never match."""
    words, want = plain_argv(command), plain_argv(rule)
    if not words or not want:
        return False
    n, m = _prefix_len(words), _prefix_len(want)
    if n is None or m is None or words[:n] != want[:m]:
        return False
    options = set(want[m:])
    if any(not w.startswith("-") for w in options):
        return False  # not a rule's shape
    if any(w.startswith("-") and w not in options for w in words[n:]):
        return False
    if root is not None:
        if outside_word(root, words[1:]) is not None:
            return False
        if words[0].rsplit("/", 1)[-1] == "git" and git_target(root, words[1:]) is None:
            return False
    return True


class ApprovalStore:
    """The per-repository memory of "always" answers, in the user's state folder
    (`repo_state_dir(root) / "approvals.json"`); a repository's own `.clover/` is never read."""

    def __init__(self, root: Path) -> None:
        self.path = repo_state_dir(root, create=False) / "approvals.json"
        self.problem = ""  # why the file could not be read ("" when fine or missing)

    def load(self) -> dict[str, list[str]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {k: [] for k in _EMPTY}
        except (OSError, UnicodeDecodeError) as exc:
            return self._bad(f"cannot read it ({exc.__class__.__name__})")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return self._bad("it is not valid JSON")
        if not isinstance(data, dict):
            return self._bad("it is not a JSON object")
        return {k: [x for x in data.get(k, []) if isinstance(x, str)] if isinstance(data.get(k), list) else []
                for k in _EMPTY}

    def _bad(self, why: str) -> dict[str, list[str]]:
        problem = f"ignoring the saved approvals in {self.path}: {why}"
        if problem != self.problem:
            log.warning(problem)
        self.problem = problem
        return {k: [] for k in _EMPTY}

    def remember(self, kind: Literal["tools", "commands"], key: str) -> None:
        """Adds a key and writes the file atomically (an unreadable old file is kept aside)."""
        data = self.load()
        if key not in data[kind]:
            data[kind].append(key)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.problem and self.path.exists():
            os.replace(self.path, self.path.with_name("approvals.json.corrupt"))
            self.problem = ""
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".approvals.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": 2, **data}, f, indent=2)
        os.replace(tmp, self.path)


class ApprovalPolicy:
    """Decides per tool call: run, ask the user, or refuse. It also tells the shell which sandbox
    profile the current mode asks for (tools/sandbox.py), for every command run in `root`."""

    def __init__(self, root: Path, mode: str, shell_allow: tuple[str, ...] = (),
                 is_writing=lambda name: False) -> None:
        self.root = Path(root)
        self.mode = mode
        self.shell_allow = tuple(shell_allow)
        self.store = ApprovalStore(root)
        self._is_writing = is_writing
        sandbox.register(self.root, self, lambda policy: policy.mode)

    def is_writing(self, name: str) -> bool:
        """True for tools that edit files."""
        return bool(self._is_writing(name))

    def sandboxed(self) -> bool:
        """Whether shell commands run inside an OS sandbox in the current mode."""
        return sandbox.confined(self.root)

    def reads_only(self, command: str) -> bool:
        """A provably read-only command (readonly.py): it runs in every mode without asking.
        Inside a sandbox it may read outside the repository (secrets are hidden there),
        without one it may not."""
        return is_read_only_command(command, None if self.sandboxed() else self.root)

    def decide(self, name: str, args: dict) -> Decision:
        """The verdict for one call in the current mode."""
        writing = self._is_writing(name)
        shell = not writing and is_shell_tool(name, args)
        if not writing and not shell:
            return Decision("run")
        command = str(args.get("command", "")) if shell else ""
        key = command_rule(command) if shell else name
        if self.mode != "yolo" and shell and self.reads_only(command):
            # what read-only mode runs, every mode runs, inside read-only mode's sandbox
            return Decision("run", always_key=key, sandbox="read-only")
        if self.mode == "yolo":
            return Decision("run", always_key=key)
        if self.mode == "read-only":
            reason = observation("read_only_shell") if shell else observation("read_only_tool", name=name)
            return Decision("refuse", reason, key)
        remembered = self.store.load()
        if writing:
            if self.mode == "auto-edit" or name in remembered["tools"]:
                return Decision("run", always_key=key)
            return Decision("ask", always_key=key)
        if any(rule_matches(command, rule, self.root) for rule in self.shell_allow + tuple(remembered["commands"])):
            return Decision("run", always_key=key)
        return Decision("ask", always_key=key)

    def remember(self, name: str, args: dict, key: str) -> None:
        """Stores an "always" answer for this kind of call (nothing when `key` is "")."""
        if not key.strip():
            return
        writing = self._is_writing(name)
        kind = "commands" if (not writing and is_shell_tool(name, args)) else "tools"
        self.store.remember(kind, key)
