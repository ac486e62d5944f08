"""Which paths under $HOME the sandbox hides and which it binds back (docs/security.md, "Shell
sandbox"): the named secret paths, the toolchain folders, and the rules that resolve every
candidate before it is bound (tools/sandbox.py builds the bubblewrap command line from them).

Only the standard library and tools.* are imported.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .statedir import cache_home, state_home

# Paths under $HOME that hold credentials; hidden (an empty tmpfs over a folder, /dev/null over a file).
SECRET_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".config", ".kube", ".docker", ".password-store",
               ".local/share/keyrings", ".mozilla", ".pki", ".terraform.d", ".vault-token.d")
SECRET_FILES = (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".yarnrc", ".vault-token",
                ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history")
# Folders under $HOME a build needs (interpreters, toolchains, package caches), bound back read-only
# over the empty $HOME; every other file there (~/.pgpass, ~/.cargo/credentials.toml, ~/.m2/settings.xml,
# ~/.cache/huggingface/token, ...) is hidden without having to be named.
TOOLCHAIN_DIRS = (".local/bin", ".local/lib", ".local/share/uv/python", ".local/share/uv/tools",
                  ".local/pipx", ".pyenv", ".rustup", ".cargo/bin", ".cargo/registry", ".cargo/git",
                  ".nvm", ".volta", ".bun/bin", "go/bin", "go/pkg/mod", ".cache/pip", ".cache/uv",
                  ".cache/go-build", ".m2/repository", ".gradle/caches", ".gradle/wrapper",
                  ".npm/_cacache", ".nuget/packages", ".sdkman/candidates", ".dotnet")


def _real(root: Path | str) -> str:
    return os.path.realpath(os.fspath(root))


def _interpreter_in_tmp(real: str) -> list[str]:
    """The interpreter's prefixes and the active virtual environment that lie under /tmp (and
    outside the repository): the private /tmp would hide the Python that runs the repository's
    tests (`clover fix`), so they are bound back read-only."""
    found: list[str] = []
    for path in (sys.prefix, sys.base_prefix, os.environ.get("VIRTUAL_ENV", "")):
        if (path and os.path.isdir(path) and _inside(path, "/tmp") and not _inside(path, real)
                and not any(_inside(path, f) for f in found)):
            found.append(path)
    return found


def _home() -> str | None:
    home = os.path.realpath(os.path.expanduser("~"))
    return home if home != "/" and os.path.isdir(home) else None


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


def _hidden_part(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _bindable(real: str, home: str, secrets: list[str]) -> bool:
    """Whether a resolved folder may be bound back into the hidden home: a folder inside `home`
    (not `home` itself), inside a TOOLCHAIN_DIRS folder or with no hidden component below
    `home`, and neither inside a secret path nor holding one."""
    if real == home or not _inside(real, home) or not os.path.isdir(real):
        return False
    if any(_inside(real, s) or _inside(s, real) for s in secrets):
        return False
    if any(_inside(real, os.path.join(home, t)) for t in TOOLCHAIN_DIRS):
        return True
    return not _hidden_part(os.path.relpath(real, home))


def _interpreter_prefix(real: str, home: str, secrets: list[str]) -> bool:
    """An interpreter prefix or virtual environment under `home` (`~/.virtualenvs/x`): a folder
    with `pyvenv.cfg` or `bin/python*`, holding no secret path."""
    if real == home or not _inside(real, home) or any(_inside(real, s) or _inside(s, real) for s in secrets):
        return False
    try:
        names = os.listdir(os.path.join(real, "bin"))
    except OSError:
        names = []
    return os.path.isfile(os.path.join(real, "pyvenv.cfg")) or any(n.startswith("python") for n in names)


def toolchain_paths(home: str, secrets: list[str]) -> list[tuple[str, str | None]]:
    """(resolved folder, where the PATH entry named it or None) for each folder under `home`
    bound back into the hidden home: TOOLCHAIN_DIRS, the PATH entries, the interpreter's
    prefixes and the active virtual environment. Every path is resolved first (symlinks, `..`,
    `//`, trailing slashes); only what `_bindable` accepts is kept, so `PATH=~//.local` or a
    `~/bin -> /` link binds nothing. The second member is the PATH entry's own spelling when it
    differs (a `~/bin -> ~/tools/bin` link): a symlink to the folder there inside the sandbox."""
    home = os.path.realpath(home)
    secrets = [os.path.realpath(s) for s in secrets]
    found: dict[str, str | None] = {}
    entries = [(os.path.join(home, p), False) for p in TOOLCHAIN_DIRS]
    entries += [(p, False) for p in os.environ.get("PATH", "").split(os.pathsep)]
    entries += [(p, True) for p in (sys.prefix, sys.base_prefix, os.environ.get("VIRTUAL_ENV", ""))]
    for path, prefix in entries:
        if not path or not os.path.isabs(path):
            continue
        real = os.path.realpath(path)
        if not (_bindable(real, home, secrets) or (prefix and _interpreter_prefix(real, home, secrets))):
            continue
        spelled = os.path.normpath(path)
        if not _inside(spelled, home) or spelled in (home, real):
            spelled = None  # only another spelling inside home gets a link
        if found.get(real) is None:
            found[real] = spelled
    outer = [p for p in found if not any(q != p and _inside(p, q) for q in found)]  # outermost only
    return [(p, found[p]) for p in outer]


def _readable(paths, home: str | None) -> list[str]:
    """The `readable` folders that may be bound back (resolved): never `/`, the home folder or a
    folder above it, nor one holding or inside a named secret path (Clover's own state and cache
    folders excepted: an evaluation environment lives there)."""
    named = [os.path.realpath(os.path.join(os.path.expanduser("~"), p)) for p in SECRET_DIRS + SECRET_FILES]
    named += [p for p in _secret_paths() if p not in (_real(state_home()), _real(cache_home()))]
    out = []
    for path in map(_real, paths):
        if path == "/" or not os.path.isdir(path) or (home and _inside(home, path)):
            continue
        if any(_inside(path, s) or _inside(s, path) for s in named):
            continue
        out.append(path)
    return out
