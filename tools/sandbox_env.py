"""The environment a command Clover runs gets (docs/security.md, "The environment rule").

Inside the sandbox a command gets an allow-listed environment, as Codex's shell environment policy
does, instead of Clover guessing which values are secret: only the names a build needs (ALLOWED,
ALLOWED_PREFIXES: PATH, HOME, LANG, TERM, TMPDIR, the toolchains' own variables), plus the names
the user adds in their own config file (`[shell] env = ["NAME", ...]`; a repository's file cannot).
A key base64- or hex-encoded, upper-cased, reversed or split over two variables reaches no command,
because no variable outside the list does. On top of that, a value holding a registered secret
(`register_secret_env`, from `--api-key-env`; OPENAI_API_KEY by default) is dropped whatever its
name, and a default-listed name that looks like a secret's (`*KEY*`, `*TOKEN*`, ...) too.
Git hardening (tools/githarden.py) is added outside yolo, sandbox or not.

Only the standard library and tools.* are imported.
"""
from __future__ import annotations

import os
import re
import stat
import threading
import tomllib

from . import githarden

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|BEARER", re.IGNORECASE)
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
MIN_SECRET_LEN = 8  # a registered key's value; shorter ones would match half the environment
MIN_NAMED_LEN = 16  # another secret-named variable's value ("disabled", a user name: not secrets)
# What a build needs. Everything else in Clover's environment stays out of sandboxed commands.
ALLOWED = frozenset((
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ",
    "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "COLUMNS", "LINES", "PAGER", "GIT_PAGER",
    "GIT_TERMINAL_PROMPT", "EDITOR", "VISUAL", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "PYENV_ROOT", "PYENV_VERSION", "UV_PYTHON", "PIP_NO_INPUT", "PIP_DISABLE_PIP_VERSION_CHECK",
    "JAVA_HOME", "GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GO111MODULE", "GOTOOLCHAIN",
    "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "CARGO_TARGET_DIR", "NVM_DIR",
    "NVM_BIN", "NODE_PATH", "NODE_ENV", "VOLTA_HOME", "BUN_INSTALL", "DOTNET_ROOT", "GEM_HOME",
    "GEM_PATH", "CC", "CXX", "CPP", "LD", "AR", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS",
    "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH", "MAKEFLAGS", "CMAKE_PREFIX_PATH", "CMAKE_GENERATOR", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CI",
    "SOURCE_DATE_EPOCH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
    "PY_COLORS", "PYTEST_ADDOPTS",
))
ALLOWED_PREFIXES = ("LC_", "PYTHON", "PYTEST_", "XDG_")
# Proxies: kept only without credentials in them (`http://user:pass@proxy` is dropped).
PROXIES = frozenset(n for p in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for n in (p, p.lower()))
NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

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


def user_allowed() -> frozenset[str]:
    """The names the user adds in their own config file: `[shell] env = ["NAME", ...]` in
    `$XDG_CONFIG_HOME/clover/config.toml` (a missing, unreadable or malformed table adds none)."""
    from .statedir import config_home

    try:
        fd = os.open(config_home() / "config.toml", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # a FIFO or device: never a hang
                return frozenset()
            data = tomllib.loads(fh.read(256 * 1024).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return frozenset()
    shell = data.get("shell")
    names = shell.get("env") if isinstance(shell, dict) else None
    if not isinstance(names, list):
        return frozenset()
    return frozenset(n for n in names if isinstance(n, str) and NAME_OK.match(n))


def _allowed(name: str, value: str, extra: frozenset[str]) -> bool:
    if name in extra:
        return True
    if name in PROXIES:
        return "@" not in value
    listed = name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name.startswith("GIT_CONFIG_")
    return listed and not (SECRET_NAME.search(name) and not name.startswith("GIT_CONFIG_"))


def allowed_env(env: dict[str, str]) -> dict[str, str]:
    """`env` cut to the allow list (ALLOWED, ALLOWED_PREFIXES, proxies without credentials, the
    user's `[shell] env` names, git's command-scope config), less any value holding a secret."""
    return without_secrets({k: v for k, v in env.items() if _allowed(k, v, user_allowed())},
                           by_name=False)


def without_secrets(env: dict[str, str], by_name: bool = True) -> dict[str, str]:
    """`env` less every variable whose value contains a secret value (and, `by_name`, every
    secret-named one). Git's command-scope config variables stay (their numbering must), a value
    holding a secret emptied (an `http.extraHeader` with the key)."""
    values = secret_values(env)
    out = {}
    for name, value in env.items():
        if name.startswith("GIT_CONFIG_"):
            if name == "GIT_CONFIG_PARAMETERS" and any(v in value for v in values):
                continue
            out[name] = "" if any(v in value for v in values) else value
        elif (by_name and SECRET_NAME.search(name)) or any(v in value for v in values):
            continue
        else:
            out[name] = value
    return out


def command_env(base: dict[str, str], profile: str, sandboxed: bool, root=None) -> dict[str, str]:
    """The environment of a shell command under `profile` ("read-only", "workspace", "off").

    "off" (yolo) changes nothing. Otherwise: only the allow list when `sandboxed`, and git gets
    the hardening: the full set (filters, diff drivers, gpg ... of `root`'s repository) in
    read-only, where nothing may run a program the repository names; in workspace (commands the
    user approved: their `git add` keeps its filters, `git push` its transport) no fsmonitor and
    no hooks. Raises githarden.HardeningError when the repository's config cannot be listed."""
    env = dict(base)
    if profile == "off":
        return env
    if sandboxed:
        env = allowed_env(env)
    if profile == "read-only" and root is not None:
        return githarden.hardened_env(root, env)
    return githarden.shell_env(env)
