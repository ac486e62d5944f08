"""The OS sandbox around run_shell (docs/security.md, "Shell sandbox").

On Linux the command runs inside bubblewrap (`bwrap`), shaped by a *profile* that the approval
mode picks (clover_cli/agent/approvals.py registers it per repository root):

- "read-only" (approval mode read-only): the whole filesystem read-only, a private /tmp and /run,
  no network, a new pid namespace with its own /proc (other processes' environments are
  unreachable), secrets paths hidden.
- "workspace" (ask, auto-edit, and any root nobody registered): like read-only, but the repository
  is writable except every `.git` inside it (bound read-only again), and the network stays on.
- "off" (yolo): no sandbox at all.

Where bwrap is missing or cannot create namespaces (tested once per process, the answer cached)
the command runs without a sandbox and the approval rules are the only guard; `status()` says so
and run_shell puts the notice in its first result. `CLOVER_SANDBOX=off` forces that fallback,
`CLOVER_SANDBOX=bwrap` insists on bubblewrap (commands fail when it cannot run). The idea of a
per-mode filesystem sandbox follows OpenAI Codex's and Anthropic Claude Code's bubblewrap sandboxes.

Only the standard library and tools.* are imported (tools import nothing else of ours).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .statedir import cache_home, state_home

PROFILES = ("read-only", "workspace", "off")
DEFAULT_PROFILE = "workspace"
MODE_PROFILES = {"read-only": "read-only", "ask": "workspace", "auto-edit": "workspace", "yolo": "off"}
# Paths under $HOME that hold credentials; hidden (an empty tmpfs over a folder, /dev/null over a file).
SECRET_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".config", ".kube", ".docker", ".password-store",
               ".local/share/keyrings", ".mozilla", ".pki", ".terraform.d", ".vault-token.d")
SECRET_FILES = (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".yarnrc", ".vault-token",
                ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history")
# Environment variables a sandboxed command does not get (API keys, agent sockets).
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Config a git inside the command always gets (command scope beats any repository's .git/config),
# so a planted core.fsmonitor or hook never runs.
GIT_HARDENING = (("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"))
MAX_GIT_SCAN_DIRS = 20000  # folders walked looking for nested .git; deeper ones stay writable

_lock = threading.Lock()
_probe: tuple[bool, str] | None = None
_profiles: dict[str, Callable[[], str]] = {}
_notice_given = False


@dataclass(frozen=True)
class Status:
    """Whether commands will be sandboxed, and why not."""

    available: bool
    reason: str  # "" when available; else a one-line reason


def _real(root: Path | str) -> str:
    return os.path.realpath(os.fspath(root))


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


def _run_probe() -> tuple[bool, str]:
    exe = shutil.which("bwrap")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed"
    argv = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--", "true"]
    try:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap could not start: {exc}"
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return False, "bubblewrap cannot create namespaces here" + (f" ({why[-1][:160]})" if why else "")
    return True, ""


def status() -> Status:
    """Whether bwrap can sandbox commands in this process (probed once, then cached)."""
    global _probe
    if forced() == "off":
        return Status(False, "the sandbox is turned off (CLOVER_SANDBOX=off)")
    with _lock:
        if _probe is None:
            _probe = _run_probe()
        ok, why = _probe
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


def command_env(base: dict[str, str], profile: str) -> dict[str, str]:
    """The environment of a command under `profile`: git hardening for every profile but "off",
    and without secret-looking variables inside the sandbox."""
    env = dict(base)
    if profile == "off":
        return env
    if status().available:
        env = {k: v for k, v in env.items() if k.startswith("GIT_CONFIG_") or not _SECRET_ENV.search(k)}
    try:
        count = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0
    for key, value in GIT_HARDENING:
        env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    return env


def git_dirs(root: Path | str) -> list[str]:
    """Every `.git` (folder or `gitdir:` file) inside `root`, nested ones too (symlinks are not
    followed; at most MAX_GIT_SCAN_DIRS folders are walked)."""
    found, walked = [], 0
    for here, dirs, files in os.walk(_real(root)):
        walked += 1
        if ".git" in dirs:
            found.append(os.path.join(here, ".git"))
            dirs.remove(".git")
        if ".git" in files:
            found.append(os.path.join(here, ".git"))
        if walked >= MAX_GIT_SCAN_DIRS:
            break
    return found


def _hide(path: str, argv: list[str]) -> None:
    if os.path.islink(path):
        return  # a symlink's target is hidden (or not) on its own
    if os.path.isdir(path):
        argv += ["--tmpfs", path]
    elif os.path.exists(path):
        argv += ["--ro-bind", "/dev/null", path]


def _secret_paths() -> list[str]:
    home = os.path.expanduser("~")
    paths = [os.path.join(home, p) for p in SECRET_DIRS + SECRET_FILES]
    for var in ("XDG_CONFIG_HOME",):
        value = os.environ.get(var, "")
        if value and os.path.isabs(value):
            paths.append(value)
    paths += [os.fspath(state_home()), os.fspath(cache_home())]  # other repositories' sessions
    return [os.path.realpath(p) for p in dict.fromkeys(paths)]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def bwrap_argv(root: Path | str, profile: str, command: list[str]) -> list[str]:
    """The bubblewrap command line that runs `command` in `root` under `profile`."""
    exe = shutil.which("bwrap") or "bwrap"
    real = _real(root)
    argv = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if profile == "read-only":
        argv += ["--unshare-net"]
        if not _inside(real, "/run"):
            argv += ["--tmpfs", "/run"]  # agent, dbus and docker sockets
    else:
        for sock in ("/run/user", "/run/dbus", "/run/docker.sock", "/var/run/docker.sock"):
            if not _inside(real, sock):
                _hide(sock, argv)
    secrets = [p for p in _secret_paths() if p != real]
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
    argv += ["--chdir", real, "--"]
    return argv + command
