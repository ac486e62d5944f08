"""The configuration every git process Clover starts gets, so a repository never runs a program
through git (docs/security.md, "Git hardening").

A repository's `.git/config` (and whatever it includes) can name programs that git runs by
itself: an fsmonitor, hooks, clean/smudge/process filters, diff drivers (`textconv`, `command`),
an external diff, merge drivers, a gpg program. Command-scope config (`GIT_CONFIG_COUNT` /
`GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, the same scope as `git -c`) beats every config file,
and child git processes inherit it. Driver names are the repository's choice, so the config is
listed first (`git config --list`, which runs nothing) and each named driver is overridden:
filters become empty (no filter runs, content passes through), diff and merge programs become
`/dev/null` (nothing can be executed: git reports "cannot run", and Clover's own diffs pass
`--no-ext-diff --no-textconv` so they never look). Conditional includes are listed whatever
their condition.

Only the standard library is imported.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

NOTHING = "/dev/null"  # a "program" that cannot be executed
# Always set: no fsmonitor, no hooks, no signature checks or gpg program, no transport at all.
STATIC = (("core.fsmonitor", "false"), ("core.hooksPath", NOTHING),
          ("log.showSignature", "false"), ("gpg.program", NOTHING),
          ("gpg.openpgp.program", NOTHING), ("gpg.x509.program", NOTHING),
          ("gpg.ssh.program", NOTHING), ("protocol.allow", "never"),
          ("core.sshCommand", NOTHING), ("credential.helper", ""))
# What a shell command outside read-only gets (the user approved it; their own fetch, push, signing
# and filters keep working): a repository's fsmonitor and hooks still never run.
SHELL_STATIC = STATIC[:2]
# The variables that would name programs or point git elsewhere, dropped from its environment.
DROPPED_ENV = ("GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND")
MAX_INCLUDES = 20
LIST_TIMEOUT = 30.0  # seconds for one `git config --list`; past it the git call does not run


def _driver_overrides(key: str) -> list[tuple[str, str]]:
    """The overrides a listed config key calls for (lower-case section and variable names)."""
    low = key.lower()
    section, _, rest = low.partition(".")
    if low == "diff.external":
        return [(key, NOTHING)]
    if "." not in rest:
        return []
    name = key[len(section) + 1:key.rindex(".")]  # subsection keeps its case
    var = low.rsplit(".", 1)[1]
    if section == "filter" and var in ("clean", "smudge", "process", "required"):
        return [(f"filter.{name}.clean", ""), (f"filter.{name}.smudge", ""),
                (f"filter.{name}.process", ""), (f"filter.{name}.required", "false")]
    if section == "diff" and var in ("textconv", "command"):
        return [(f"diff.{name}.{var}", NOTHING)]
    if section == "merge" and var == "driver":
        return [(f"merge.{name}.driver", NOTHING)]
    return []


class HardeningError(subprocess.SubprocessError):
    """The configuration could not be listed, so the git call it was for must not run (it
    could run a driver nobody overrode); str() is one line."""


def _listing(cwd: Path, env: dict[str, str], file: str | None = None) -> list[tuple[str, str, str]]:
    """(origin file, key, value) for every config entry git sees in `cwd` (or in `file`).
    Fails closed: HardeningError when git cannot list it (a timeout, a failure)."""
    argv = ["git", "config", "--includes", "--show-origin", "-z", "--list"]
    if file is not None:
        argv[2:2] = ["--file", file]
    where = file or os.fspath(cwd)
    try:
        res = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=LIST_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise HardeningError(f"git config --list took over {LIST_TIMEOUT:g} s for {where}; "
                             f"git was not run there") from None
    except OSError as exc:
        raise HardeningError(f"git config --list could not run for {where} ({exc.strerror or exc}); "
                             f"git was not run there") from None
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()[:1] or [f"exit {res.returncode}"]
        raise HardeningError(f"git config --list failed for {where} ({why[0][:200]}); "
                             f"git was not run there")
    fields = res.stdout.split(b"\0")
    out = []
    for origin, entry in zip(fields[0::2], fields[1::2]):
        key, _, value = entry.decode("utf-8", "replace").partition("\n")
        origin_s = origin.decode("utf-8", "replace")
        out.append((origin_s[5:] if origin_s.startswith("file:") else "", key, value))
    return out


def _include_target(origin: str, value: str) -> str | None:
    if not value:
        return None
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        if not origin:
            return None
        path = os.path.join(os.path.dirname(origin), path)
    return path if os.path.isfile(path) else None


def config_pairs(cwd: Path | str, base_env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """The command-scope config for git run in `cwd`: STATIC, then an override for every filter,
    diff driver, external diff and merge driver its config (any scope, any include) names.
    HardeningError when a listing fails or times out (the caller must not run git then)."""
    env = clean_env(base_env if base_env is not None else os.environ)
    env = _with_pairs(env, STATIC)
    pairs = list(STATIC)
    seen: set[str] = set()
    entries = _listing(Path(cwd), env) if os.path.isdir(cwd) else []
    files_done: set[str] = set()
    while entries:
        origin, key, value = entries.pop()
        low = key.lower()
        if low.startswith(("include.", "includeif.")) and low.endswith(".path"):
            target = _include_target(origin, value)  # listed whether or not its condition holds
            if target and target not in files_done and len(files_done) < MAX_INCLUDES:
                files_done.add(target)
                entries += _listing(Path(cwd), env, target)
            continue
        for pair in _driver_overrides(key):
            if pair[0].lower() not in seen:
                seen.add(pair[0].lower())
                pairs.append(pair)
    return pairs


def clean_env(base) -> dict[str, str]:
    """`base` without the variables that name programs for git (DROPPED_ENV)."""
    return {k: v for k, v in base.items() if k not in DROPPED_ENV}


def _with_pairs(env: dict[str, str], pairs) -> dict[str, str]:
    env = dict(env)
    try:
        count = max(0, int(env.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0
    for key, value in pairs:
        env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    return env


def hardened_env(cwd: Path | str, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: os.environ) with the full hardening for git run in `cwd` added after any
    command-scope config already there (later entries win); HardeningError when the config
    cannot be listed."""
    env = clean_env(base if base is not None else os.environ)
    pairs = config_pairs(cwd, env)
    return _with_pairs(env, pairs)


def shell_env(base: dict[str, str]) -> dict[str, str]:
    """`base` with SHELL_STATIC added (for user-approved commands that may run git anywhere)."""
    return _with_pairs(base, SHELL_STATIC)
