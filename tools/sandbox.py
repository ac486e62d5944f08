"""The OS sandbox around run_shell (docs/security.md, "Shell sandbox").

On Linux the command runs inside bubblewrap (`bwrap`), shaped by a *profile* that the approval
mode picks (clover_cli/agent/approvals.py registers it per repository root):

- "read-only" (approval mode read-only): the whole filesystem read-only, a private /tmp and /run,
  no network, a new pid namespace with its own /proc (other processes' environments are
  unreachable), secrets paths hidden.
- "workspace" (ask, auto-edit, and any root nobody registered): like read-only, but the repository
  is writable except every `.git` inside it (bound read-only again), and the network stays on.
- "off" (yolo): no sandbox at all.

Every sandbox drops all capabilities (root included) and, where it can, runs in its own user
namespace that forbids nested ones; $HOME is an empty tmpfs with only the toolchain folders bound
back (resolved first: `toolchain_paths`); the environment is an allow list (tools/sandbox_env.py);
a seccomp filter refuses set-id modes and the files a command changed lose any set-id bit
afterwards (tools/setid.py).

Where bwrap is missing or cannot create namespaces (tested once per process, the answer cached)
the command runs without a sandbox and the approval rules are the only guard; `status()` says so
and run_shell puts the notice in its first result. `CLOVER_SANDBOX=off` forces that fallback,
`CLOVER_SANDBOX=bwrap` insists on bubblewrap (commands fail when it cannot run). The idea of a
per-mode filesystem sandbox follows OpenAI Codex's and Anthropic Claude Code's bubblewrap sandboxes.

Only the standard library and tools.* are imported (tools import nothing else of ours).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import sandbox_env, setid
from .sandbox_paths import (SECRET_DIRS, SECRET_FILES, TOOLCHAIN_DIRS, _home, _inside,  # noqa: F401
                            _interpreter_in_tmp, _readable, _real, _secret_paths, toolchain_paths)
from .walk import walk  # iterative: a 1,500-deep tree cannot raise RecursionError

PROFILES = ("read-only", "workspace", "off")
DEFAULT_PROFILE = "workspace"
MODE_PROFILES = {"read-only": "read-only", "ask": "workspace", "auto-edit": "workspace", "yolo": "off"}
SETID_GUARD = Path(__file__).resolve().with_name("setid.py")  # run as a script around confine()d programs
MAX_GIT_SCAN_DIRS = 20000  # folders walked looking for nested .git; deeper ones stay writable

# Every sandbox: no capabilities (root too: no remount, bind, umount, sethostname), its own pid,
# IPC and UTS namespaces, no terminal, and it dies with Clover.
BASE_FLAGS = ("--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
              "--die-with-parent", "--new-session")
# Where user namespaces work: a new one (uid and gid kept) in which no further one can be made, so
# a command cannot gain capabilities over its own mounts by nesting.
USERNS_FLAGS = ("--unshare-user", "--disable-userns")

_lock = threading.Lock()
_probe: tuple[bool, str, tuple[str, ...]] | None = None
_profiles: dict[str, Callable[[], str]] = {}
_notice_given = False


@dataclass(frozen=True)
class Status:
    """Whether commands will be sandboxed, and why not."""

    available: bool
    reason: str  # "" when available; else a one-line reason


def register(root: Path | str, owner: object, mode_of: Callable[[object], str]) -> None:
    """Ties `root`'s profile to `owner` (an approval policy): its current approval mode,
    `mode_of(owner)`, picks the profile at each call. The newest registration for a root wins;
    when `owner` is garbage collected the root falls back to the default profile."""
    ref = weakref.ref(owner)

    def current() -> str:
        obj = ref()
        return MODE_PROFILES.get(mode_of(obj), DEFAULT_PROFILE) if obj is not None else DEFAULT_PROFILE

    with _lock:
        _profiles[_real(root)] = current


def profile_for(root: Path | str) -> str:
    """The profile a command in `root` runs under now."""
    with _lock:
        getter = _profiles.get(_real(root))
    return getter() if getter is not None else DEFAULT_PROFILE


def forced() -> str:
    """The CLOVER_SANDBOX setting: "off", "bwrap" or "auto" (unset or anything else)."""
    value = os.environ.get("CLOVER_SANDBOX", "").strip().lower()
    return value if value in ("off", "bwrap") else "auto"


def _try(exe: str, flags: tuple[str, ...]) -> tuple[bool, str]:
    argv = [exe, *BASE_FLAGS, *flags, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--unshare-net", "--", "true"]
    try:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap could not start: {exc}"
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return False, "bubblewrap cannot create namespaces here" + (f" ({why[-1][:160]})" if why else "")
    return True, ""


def _run_probe() -> tuple[bool, str, tuple[str, ...]]:
    """(usable, reason, extra flags): with a user namespace that forbids nested ones where the
    system allows it, else without."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed", ()
    if _try(exe, USERNS_FLAGS)[0]:
        return True, "", USERNS_FLAGS
    ok, why = _try(exe, ())
    return ok, why, ()


def status() -> Status:
    """Whether bwrap can sandbox commands in this process (probed once, then cached)."""
    global _probe
    if forced() == "off":
        return Status(False, "the sandbox is turned off (CLOVER_SANDBOX=off)")
    with _lock:
        if _probe is None:
            _probe = _run_probe()
        ok, why, _ = _probe
    return Status(ok, why)


def reset_probe() -> None:
    """Forget the cached probe and the one-time notice (tests; after installing bwrap)."""
    global _probe, _notice_given
    with _lock:
        _probe, _notice_given = None, False


def confined(root: Path | str) -> bool:
    """True when a command in `root` runs inside a sandbox now (profile not "off", bwrap usable)."""
    return profile_for(root) != "off" and status().available


def take_notice(profile: str) -> str:
    """The one-time line saying that commands run without a sandbox ("" after the first time,
    when sandboxed, or for the "off" profile)."""
    global _notice_given
    if profile == "off":
        return ""
    st = status()
    if st.available:
        return ""
    with _lock:
        if _notice_given:
            return ""
        _notice_given = True
    return (f"[no shell sandbox: {st.reason}; commands run unconfined and only the approval rules "
            f"guard them (install bubblewrap, see docs/security.md)]")


def command_env(base: dict[str, str], profile: str, root: Path | str | None = None) -> dict[str, str]:
    """The environment of a command in `root` under `profile` (tools/sandbox_env.py): git
    hardening for every profile but "off", and no secrets inside the sandbox."""
    return sandbox_env.command_env(base, profile, profile != "off" and status().available, root)


def clear_setid(root: Path | str, since: float) -> list[str]:
    """After a command under a profile other than "off": the set-id bits of every file in `root`
    it changed are cleared (tools/setid.py); returns those files."""
    return setid.clear_setid([_real(root)], since)


def _gitdir_target(path: str) -> str | None:
    """The real git dir a `gitdir: X` file names (X relative to the file's folder), or None."""
    try:
        with open(path, "rb") as fh:
            first = fh.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:"):].strip()
    if not target:
        return None
    return os.path.realpath(os.path.join(os.path.dirname(path), target))


def git_dirs(root: Path | str) -> list[str]:
    """Every `.git` inside `root` (folders and `gitdir:` files, nested ones too), plus the real
    git dir each `gitdir:` file points to, with its `commondir` (symlinks are not followed; at most
    MAX_GIT_SCAN_DIRS folders are walked)."""
    found, walked, real = [], 0, _real(root)
    for here, dirs, files in walk(real):
        walked += 1
        if ".git" in dirs:
            found.append(os.path.join(here, ".git"))
            dirs.remove(".git")
        if ".git" in files:
            dot_git = os.path.join(here, ".git")
            found.append(dot_git)
            target = _gitdir_target(dot_git)
            if target and os.path.isdir(target):
                found.append(target)
                common = os.path.join(target, "commondir")
                if os.path.isfile(common):
                    with open(common, encoding="utf-8", errors="replace") as fh:
                        rel = fh.read().strip()
                    if rel:
                        found.append(os.path.realpath(os.path.join(target, rel)))
        if walked >= MAX_GIT_SCAN_DIRS:
            break
    # outside the repository everything is read-only already (and may be hidden: not re-exposed)
    return [p for p in dict.fromkeys(found) if _inside(p, real) and os.path.exists(p)]


def _hide(path: str, argv: list[str]) -> None:
    if os.path.islink(path):
        return  # a symlink's target is hidden (or not) on its own
    if os.path.isdir(path):
        argv += ["--tmpfs", path]
    elif os.path.exists(path):
        argv += ["--ro-bind", "/dev/null", path]


def confine(root: Path | str, argv: list[str], env: dict[str, str], writable: tuple[str, ...] = (),
            readable: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str], bool]:
    """(argv, env, sandboxed) to run a program Clover starts itself (`clover fix`'s test command,
    `clover swebench evaluate`'s tests) like an approved shell command: in the workspace sandbox
    where bwrap works, `writable` folders outside the repository bound writable (a report
    folder), `readable` ones bound read-only (an environment in Clover's cache); always with
    the allow-listed environment, and under tools/setid.py, which refuses set-id modes and clears
    any set-id bit left under the writable folders afterwards, sandbox or not."""
    env = sandbox_env.command_env(env, "workspace", True, root)
    guard = [sys.executable, "-I", "-S", str(SETID_GUARD), _real(root), *map(_real, writable), "--"]
    if forced() == "off" or not status().available:
        return guard + list(argv), env, False
    inner = bwrap_argv(root, "workspace", list(argv), writable=writable, readable=readable, seccomp=True)
    return guard + inner, env, True


def bwrap_argv(root: Path | str, profile: str, command: list[str], writable: tuple[str, ...] = (),
               readable: tuple[str, ...] = (), seccomp: bool = False) -> list[str]:
    """The bubblewrap command line that runs `command` in `root` under `profile` (`readable`,
    `writable`: folders bound read-only, read-write after everything else; `seccomp`: the
    set-id filter's `--seccomp` with tools/setid.py's SECCOMP_FD_WORD for its descriptor)."""
    exe = shutil.which("bwrap") or "bwrap"
    real = _real(root)
    status()
    with _lock:
        extra = _probe[2] if _probe is not None else ()
    argv = [exe, *BASE_FLAGS, *extra, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp"]
    if profile == "read-only":
        argv += ["--unshare-net"]
        if not _inside(real, "/run"):
            argv += ["--tmpfs", "/run"]  # agent, dbus and docker sockets
    else:
        for sock in ("/run/user", "/run/dbus", "/run/docker.sock", "/var/run/docker.sock"):
            if not _inside(real, sock):
                _hide(sock, argv)
    secrets = [p for p in _secret_paths() if p != real]
    home = _home()
    if home is not None and _inside(home, real):
        home = None  # the repository holds the home folder: only the named secrets are hidden
    bound: list[str] = []
    if home is not None:
        argv += ["--tmpfs", home]  # everything in $HOME is gone but the toolchains and the repository
        chains = [(p, link) for p, link in toolchain_paths(home, secrets) if not _inside(p, real)]
        bound = [p for p, _ in chains]
        for path, link in chains:
            argv += ["--ro-bind", path, path]
        links: list[str] = []
        for path, link in chains:
            if link and not any(_inside(link, b) or _inside(b, link) for b in bound + links):
                links.append(link)
                argv += ["--symlink", path, link]
        secrets = [p for p in secrets if not _inside(p, home) or any(_inside(p, b) for b in bound)]
    above = [p for p in secrets if _inside(real, p)]  # the repository lies inside it: hide first
    for path in above:
        _hide(path, argv)
    argv += ["--ro-bind" if profile == "read-only" else "--bind", real, real]
    if profile != "read-only":
        for git in git_dirs(real):
            argv += ["--ro-bind", git, git]
    for path in secrets:
        if path in above or (_inside(path, "/tmp") and not _inside(path, real)):
            continue  # hidden already (the private /tmp covers it)
        _hide(path, argv)
    for path in _interpreter_in_tmp(real):  # a venv under /tmp (a CI clone) stays runnable
        argv += ["--ro-bind", os.path.realpath(path), path]
    for path in _readable(readable, home or _home()):
        argv += ["--ro-bind", path, path]
    for path in writable:
        argv += ["--bind", _real(path), _real(path)]
    if seccomp:
        argv += ["--seccomp", setid.SECCOMP_FD_WORD]
    argv += ["--chdir", real, "--"]
    return argv + command
