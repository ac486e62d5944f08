"""Building an evaluation environment runs code the repository names: `pip install` builds
every requirement it lists (a `setup.py`, a build backend) and an installed package can run code
at each interpreter start (a `.pth` file). So the install steps of a build, and every run of the
built interpreter (its verification), go through tools/sandbox.py's `confine`, like the
evaluation's own steps (docs/security.md, "Shell sandbox"): the `workspace` sandbox with the
environment folder as the writable repository, the allow-listed environment (no API key), set-id
modes refused. The network stays on there (the workspace profile does not unshare it): pip must
download. Making the virtual environment itself (`uv venv`, `python -m venv`) runs only the
user's interpreter and stays outside.

The package tools' own settings (`PIP_*`, `UV_*`: an index, `PIP_NO_INDEX`, find-links) pass
too, unless a value holds credentials (`@`) or a secret; local paths a requirement names (a
wheel, a source folder, outside `$HOME`'s secrets) are bound read-only so pip can read them.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

PACKAGE_PREFIXES = ("PIP_", "UV_")
__all__ = ["confined_argv", "local_sources", "run_confined"]


def local_sources(args: list[str], requirements: str | None = None) -> tuple[str, ...]:
    """The folders holding local paths named by pip `args` or `requirements` lines (`/x/y.whl`,
    `file:///x/src`, `name @ file:///x`): bound read-only in the build's sandbox."""
    words = list(args)
    for line in (requirements or "").splitlines():
        words.extend(line.split())
    found = []
    for word in words:
        path = word[len("file://"):] if word.startswith("file://") else word
        if os.path.isabs(path) and os.path.exists(path):
            found.append(path if os.path.isdir(path) else os.path.dirname(path))
    return tuple(dict.fromkeys(found))


def confined_argv(root: Path, argv: list[str], base: dict[str, str], writable: tuple = (),
                  readable: tuple = ()) -> tuple[list[str], dict[str, str]]:
    """(argv, env) running `argv` in the workspace sandbox rooted at the environment folder
    `root`: `writable` and `readable` folders bound as such, the package tools' settings kept."""
    from clover_cli.tools.sandbox import confine
    from clover_cli.tools.sandbox_env import without_secrets

    out, env, _ = confine(root, argv, base, writable=tuple(map(str, writable)),
                          readable=tuple(map(str, readable)))
    tools = {k: v for k, v in base.items() if k.startswith(PACKAGE_PREFIXES) and "@" not in v}
    env.update(without_secrets(tools))
    return out, env


def run_confined(root: Path, argv: list[str], base: dict[str, str], readable: tuple = (),
                 **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run of `argv` confined as `confined_argv` does, nothing writable but `root`."""
    out, env = confined_argv(root, argv, base, readable=readable)
    return subprocess.run(out, env=env, **kwargs)
