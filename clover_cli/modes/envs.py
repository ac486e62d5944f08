"""Per-instance test environments for local evaluation, built once per repository + version.

An environment is a virtual environment made for the spec's Python version (`uv venv --seed`
when uv is on PATH, so pip is there for the install steps; else `pythonX.Y -m venv`) with the
spec's dependencies installed (`uv pip` or pip): the requirements file read from the local clone
at the instance's environment_setup_commit (or base commit), a package list, and `pip_packages`. The repository itself is installed later, in
each evaluation worktree (the spec's `install` step), since every instance has its own checkout.

Environments are cached under `--env-dir` (default `$XDG_CACHE_HOME/clover/swebench-envs`),
keyed by repository, version and the spec's contents; a finished one holds `clover-env.json`
and is reused as is. `--python PATH` skips all this and runs the tests with that interpreter.
Conda-only specs (`environment.yml`) cannot be reproduced here: their pip_packages are installed
and the environment records a warning (the docker harness is exact).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from clover_cli.modes.specs import EvalSpec
from clover_cli.tools.statedir import cache_home

ENV_META = "clover-env.json"
_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_guard = threading.Lock()


class EnvError(RuntimeError):
    """An environment could not be built or used; one line for the report."""


@dataclass(frozen=True)
class TestEnv:
    """A Python to run an instance's tests with."""

    __test__ = False  # not a pytest test class

    python: Path  # the interpreter
    root: Path | None = None  # the venv folder (None: a forced --python)
    key: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bin_dir(self) -> Path:
        return self.python.parent

    def lock(self) -> threading.Lock:
        """One evaluation at a time per built environment (the repository is installed into it);
        a forced interpreter gets nothing installed, so its runs need no lock."""
        if self.root is None:
            return threading.Lock()
        with _guard:
            return _locks[self.key or str(self.python)]

    def environ(self) -> dict[str, str]:
        """Environment variables for commands run with this Python first on PATH."""
        env = dict(os.environ)
        env["PATH"] = str(self.bin_dir) + os.pathsep + env.get("PATH", "")
        if self.root is not None:
            env["VIRTUAL_ENV"] = str(self.root)
        env.pop("PYTHONHOME", None)
        env.pop("PYTHONPATH", None)
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        env["PY_COLORS"] = "0"
        return env

    def has_module(self, name: str) -> bool:
        """Whether this interpreter can import `name`."""
        try:
            proc = subprocess.run([str(self.python), "-c", f"import {name}"], capture_output=True,
                                  timeout=120, env=self.environ(), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0


def default_env_dir() -> Path:
    """`$XDG_CACHE_HOME/clover/swebench-envs`."""
    return cache_home() / "swebench-envs"


def forced_env(python: str) -> TestEnv:
    """`--python`: this interpreter (a path or a name on PATH), used as it is."""
    found = shutil.which(python) if os.sep not in python else python
    if not found or not Path(found).exists():
        raise EnvError(f"--python {python!r} not found")
    return TestEnv(python=Path(os.path.abspath(found)), key=f"python:{found}")


def env_key(repo: str, version: str, spec: EvalSpec) -> str:
    """`owner__name-VERSION-HASH8`: the cache folder name of an environment."""
    digest = hashlib.sha256("\0".join([repo, version, *spec.env_key_parts()]).encode()).hexdigest()
    safe_version = "".join(c if c.isalnum() or c in "._" else "_" for c in version) or "noversion"
    return f"{repo.replace('/', '__')}-{safe_version}-{digest[:8]}"


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


class _Builder:
    def __init__(self, root: Path, log: TextIO | None, name: str):
        self.root = root
        self.log = log if log is not None else sys.stderr
        self.name = name
        self.build_log = root.parent / (root.name + ".build.log")
        self.uv = shutil.which("uv")

    def say(self, text: str) -> None:
        self.log.write(f"env {self.name}: {text}\n")
        self.log.flush()

    def run(self, argv: list[str], cwd: Path | None = None, timeout: float = 3600) -> None:
        with open(self.build_log, "a", encoding="utf-8") as fh:
            fh.write("$ " + " ".join(argv) + "\n")
            fh.flush()
            try:
                proc = subprocess.run(argv, cwd=str(cwd) if cwd else None, stdout=fh,
                                      stderr=subprocess.STDOUT, timeout=timeout,
                                      stdin=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError) as exc:
                raise EnvError(f"{argv[0]} failed to run: {exc}") from None
        if proc.returncode != 0:
            raise EnvError(f"`{' '.join(argv[:4])} ...` failed (exit {proc.returncode}); "
                           f"see {self.build_log}")

    def create(self, version: str) -> Path:
        if self.uv:
            self.say(f"creating a virtual environment with uv (python {version or 'default'})")
            self.run([self.uv, "venv", "--quiet", "--seed", *(["--python", version] if version else []),
                      str(self.root)])
        else:
            exe = _find_python(version)
            self.say(f"creating a virtual environment with {exe} -m venv")
            self.run([exe, "-m", "venv", str(self.root)])
        return _venv_python(self.root)

    def pip(self, python: Path, args: list[str], what: str) -> None:
        self.say(f"installing {what}")
        if self.uv:
            self.run([self.uv, "pip", "install", "--quiet", "--python", str(python), *args])
        else:
            self.run([str(python), "-m", "pip", "install", "--quiet",
                      "--disable-pip-version-check", *args])


def _find_python(version: str) -> str:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not version or version == here:
        return sys.executable
    found = shutil.which(f"python{version}")
    if not found:
        raise EnvError(f"Python {version} is not installed (install it, install uv, "
                       "or force one interpreter with --python)")
    return found


def _git_show(clone: Path, commit: str, path: str) -> str | None:
    from clover_cli.modes.worktree import git  # the one hardened git runner

    proc = git(clone, "show", f"{commit}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def _official_table(name: str):
    try:
        from swebench.harness.constants import python as consts  # swebench 4.x
    except Exception:
        return None
    return getattr(consts, name, None)


def _requirements(clone: Path, repo: str, commit: str) -> str | None:
    """The repository's requirements at `commit`, read from the local clone (not fetched): the
    file the official harness reads for this repository (else requirements.txt), one level of
    `-r` includes followed, editable/self installs and comments dropped."""
    paths = (_official_table("MAP_REPO_TO_REQS_PATHS") or {}).get(repo) or ["requirements.txt"]
    for path in paths:
        text = _git_show(clone, commit, path)
        if text is not None:
            break
    else:
        return None
    folder = path.rpartition("/")[0]
    own: list[str] = []
    included: list[str] = []
    drop = ("-e .", "#", ".[test")
    for line in text.splitlines():
        if line.strip().startswith("-r"):
            name = line.strip()[2:].strip()
            extra = _git_show(clone, commit, f"{folder}/{name}" if folder else name) or ""
            included.extend(ln for ln in extra.splitlines() if not ln.strip().startswith(drop))
        elif not line.strip().startswith(drop):
            own.append(line)
    out = "\n".join(included + own) + "\n"
    for old, new in _official_table("REPLACE_REQ_PACKAGES") or ():
        pattern = rf"^{re.escape(old)}([<>=!~]=?.*|$)" + ("\n?" if new is None else "")
        out = re.sub(pattern, new or "", out, flags=re.M)
    return out


def ensure_env(spec: EvalSpec, repo: str, version: str, clone: Path, commit: str,
               env_dir: Path | None = None, log: TextIO | None = None) -> TestEnv:
    """The cached environment for repo + version, built first if needed (progress on `log`)."""
    key = env_key(repo, version, spec)
    root = Path(env_dir or default_env_dir()).expanduser().resolve() / key
    with _guard:
        lock = _locks[key]
    with lock:
        meta_path = root / ENV_META
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                return TestEnv(python=Path(meta["python"]), root=root, key=key,
                               warnings=tuple(meta.get("warnings", ())))
            except (OSError, ValueError, KeyError):
                pass  # a broken record: build again
        if root.exists():
            shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        builder = _Builder(root, log, key)
        builder.build_log.unlink(missing_ok=True)
        python = builder.create(spec.python)
        warnings: list[str] = []
        if spec.packages == "requirements.txt":
            text = _requirements(clone, repo, commit)
            if text is None:
                warnings.append(f"no requirements file found at {commit[:12]}")
            else:
                req = root / "clover-requirements.txt"
                req.write_text(text, encoding="utf-8")
                builder.pip(python, ["-r", str(req)], f"the requirements at {commit[:12]}")
        elif spec.packages == "environment.yml":
            warnings.append("the spec's environment.yml is a conda environment; only its "
                            "pip_packages are installed locally (use --evaluate docker to be exact)")
        elif spec.packages.strip():
            builder.pip(python, spec.packages.split(), spec.packages)
        if spec.pip_packages:
            builder.pip(python, list(spec.pip_packages), " ".join(spec.pip_packages))
        for w in warnings:
            builder.say("warning: " + w)
        meta = {"repo": repo, "version": version, "python": str(python), "spec_source": spec.source,
                "python_version": spec.python, "warnings": warnings}
        meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        builder.say("ready")
        return TestEnv(python=python, root=root, key=key, warnings=tuple(warnings))
