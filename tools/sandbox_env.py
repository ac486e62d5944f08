"""The environment a command Clover runs gets (docs/security.md, "The environment rule").

Inside the sandbox a command gets no secret: no variable named like one (`*KEY*`, `*TOKEN*`, ...),
and no variable, whatever its name, whose value holds a secret value: the API key Clover was
told to use (`register_secret_env`, from `--api-key-env`; OPENAI_API_KEY by default) or the
value of any secret-named variable. So `LLM_BEARER=$OPENAI_API_KEY` is dropped too.
Git hardening (tools/githarden.py) is added outside yolo, sandbox or not.

Only the standard library and tools.* are imported.
"""
from __future__ import annotations

import os
import re
import threading

from . import githarden

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|BEARER", re.IGNORECASE)
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
MIN_SECRET_LEN = 8  # a registered key's value; shorter ones would match half the environment
MIN_NAMED_LEN = 16  # another secret-named variable's value ("disabled", a user name: not secrets)

_lock = threading.Lock()
_key_envs: set[str] = {DEFAULT_KEY_ENV}


def register_secret_env(name: str | None) -> None:
    """Names a variable that holds a secret for this process (the backend's API key variable);
    its value is kept from every sandboxed command under any name."""
    if name:
        with _lock:
            _key_envs.add(name)


def secret_values(env: dict[str, str]) -> set[str]:
    """The secret values found in `env` (and the process environment): registered key
    variables' values (MIN_SECRET_LEN characters or more) and every other secret-named
    variable's value (MIN_NAMED_LEN or more)."""
    with _lock:
        names = set(_key_envs)
    found = set()
    for source in (os.environ, env):
        for name, value in source.items():
            if name.startswith("GIT_CONFIG_"):
                continue
            need = MIN_SECRET_LEN if name in names else MIN_NAMED_LEN if SECRET_NAME.search(name) else 0
            if need and len(value.strip()) >= need:
                found.add(value.strip())
    return found


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """`env` less every secret-named variable and every variable whose value contains a secret
    value. Git's command-scope config variables stay (their numbering must), a value holding a
    secret emptied (an `http.extraHeader` with the key)."""
    values = secret_values(env)
    out = {}
    for name, value in env.items():
        if name.startswith("GIT_CONFIG_"):
            if name == "GIT_CONFIG_PARAMETERS" and any(v in value for v in values):
                continue
            out[name] = "" if any(v in value for v in values) else value
        elif SECRET_NAME.search(name) or any(v in value for v in values):
            continue
        else:
            out[name] = value
    return out


def command_env(base: dict[str, str], profile: str, sandboxed: bool, root=None) -> dict[str, str]:
    """The environment of a shell command under `profile` ("read-only", "workspace", "off").

    "off" (yolo) changes nothing. Otherwise: secrets are dropped when `sandboxed`, and git gets
    the hardening: the full set (filters, diff drivers, gpg ... of `root`'s repository) in
    read-only, where nothing may run a program the repository names; in workspace (commands the
    user approved: their `git add` keeps its filters, `git push` its transport) no fsmonitor and
    no hooks."""
    env = dict(base)
    if profile == "off":
        return env
    if sandboxed:
        env = without_secrets(env)
    if profile == "read-only" and root is not None:
        return githarden.hardened_env(root, env)
    return githarden.shell_env(env)
