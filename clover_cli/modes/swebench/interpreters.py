"""Python interpreters for local evaluation: finding them, and overlaying a patched worktree.

Discovery looks where users keep their Pythons, in this order: `pythonX.Y` on PATH, pyenv's
versions (`$PYENV_ROOT/versions`, default `~/.pyenv/versions`), uv-managed Pythons
(`$UV_PYTHON_INSTALL_DIR`, default `~/.local/share/uv/python`). Every candidate is run once and
kept only when it reports the version asked for (a pyenv shim for a version that is not
installed fails and is skipped).

An overlay (`--python`): the tests must import the patched worktree, not a copy of the project
installed into the forced interpreter. The overlay is a venv made by that interpreter without
pip whose one `.pth` file puts the worktree's import root first (`src/` in a src layout, else the
worktree) and then adds every site-packages folder of the forced interpreter, in its order, so
everything else it imports stays the same.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path




class EnvError(RuntimeError):
    """An environment could not be built or used; one line for the report (envs.py re-exports it)."""


_VERSION_DIR = re.compile(r"^(?:cpython-)?(\d+)\.(\d+)\.(\d+)")


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def search_roots() -> list[tuple[str, Path]]:
    """(label, folder) of the managed-Python folders searched, in order."""
    pyenv = os.environ.get("PYENV_ROOT") or str(_home() / ".pyenv")
    uv = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(_home() / ".local/share/uv/python")
    return [("pyenv", Path(pyenv) / "versions"), ("uv", Path(uv))]


def python_version(exe: str | Path) -> str | None:
    """"X.Y" of an interpreter, or None when it does not run."""
    try:
        proc = subprocess.run([str(exe), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and re.fullmatch(r"\d+\.\d+", out) else None


def _managed(root: Path, version: str) -> list[Path]:
    """Interpreters for `version` in a pyenv/uv folder, newest patch release first."""
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        m = _VERSION_DIR.match(entry.name)
        if not m or f"{m.group(1)}.{m.group(2)}" != version:
            continue
        for name in (f"python{version}", "python3", "python"):
            exe = entry / "bin" / name
            if exe.exists():
                found.append((int(m.group(3)), entry.name, exe))
                break
    return [exe for *_, exe in sorted(found, reverse=True)]


def candidates(version: str) -> list[tuple[str, Path]]:
    """(where, path) of every place an interpreter for `version` may be, in search order."""
    out: list[tuple[str, Path]] = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        out.append(("PATH", Path(on_path)))
    for label, root in search_roots():
        out.extend((label, exe) for exe in _managed(root, version))
    return out


def find_python(version: str) -> Path | None:
    """The first interpreter found for `version` ("3.9") that runs and is that version."""
    for _, exe in candidates(version):
        if python_version(exe) == version:
            return exe
    return None


def not_found_message(version: str) -> str:
    """Why no Python `version` was found, and what to do."""
    roots = ", ".join(str(root) for _, root in search_roots())
    return (f"Python {version} is not installed (looked for python{version} on PATH and in "
            f"{roots}): install it (e.g. `pyenv install {version}` or `uv python install "
            f"{version}`), install uv, or force one interpreter with --python")


def import_root(tree: Path) -> Path:
    """Where the worktree's own packages are imported from: `src/` in a src layout."""
    src = tree / "src"
    if src.is_dir() and any(p.suffix == ".py" or (p.is_dir() and not p.name.startswith((".", "_"))
                                                  and not p.name.endswith(".egg-info"))
                            for p in src.iterdir()):
        return src  # packages, namespace packages included, or modules
    return tree


_SITE_DIRS = ("import json, site, sys\n"
              "dirs = ([site.getusersitepackages()] if site.ENABLE_USER_SITE else []) "
              "+ site.getsitepackages()\n"
              "print(json.dumps([d for d in dirs if d in sys.path]))\n")


def make_overlay(python: Path, tree: Path, dest: Path) -> Path:
    """A venv at `dest` on top of `python` whose imports see `tree` first; its interpreter.

    EnvError (a refusal, with the reason) when the overlay cannot be made: the tests would
    otherwise import the forced interpreter's installed copy instead of the patched worktree.
    """
    why = "the tests would import its installed copy of the project, not the patched worktree"
    try:
        probe = subprocess.run([str(python), "-c", _SITE_DIRS], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
        site_dirs = json.loads(probe.stdout) if probe.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        site_dirs = None
    if not isinstance(site_dirs, list):
        raise EnvError(f"--python {python}: cannot read its site-packages folders; {why}")
    shutil.rmtree(dest, ignore_errors=True)
    try:
        made = subprocess.run([str(python), "-m", "venv", "--without-pip", str(dest)],
                              capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvError(f"--python {python}: cannot make an overlay venv ({exc}); {why}") from None
    if made.returncode != 0:
        tail = (made.stderr or made.stdout).strip().splitlines()[-1:] or [f"exit {made.returncode}"]
        raise EnvError(f"--python {python}: cannot make an overlay venv ({tail[0][:200]}); {why}")
    overlay_py = dest / "bin" / "python"
    purelib = subprocess.run([str(overlay_py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if purelib.returncode != 0 or not purelib.stdout.strip():
        raise EnvError(f"--python {python}: its overlay venv does not run; {why}")
    lines = [str(import_root(tree).resolve())]
    lines += [f"import site; site.addsitedir({d!r})" for d in site_dirs]
    Path(purelib.stdout.strip(), "00-clover-worktree.pth").write_text("\n".join(lines) + "\n",
                                                                       encoding="utf-8")
    return overlay_py
