"""Per-instance test environments for local evaluation, built once per repository + version.

An environment is a virtual environment made for the spec's Python version (`uv venv --seed`
when uv is on PATH, so pip is there for the install steps; else `pythonX.Y -m venv`, the
interpreter found by interpreters.py) with the spec's dependencies installed (`uv pip` or pip):
the requirements file read from the local clone at the instance's environment_setup_commit (at
the base commit, with a note, when that commit is not in the clone or has no such file), a
package list, and `pip_packages`. The repository itself is installed later, in each evaluation
worktree (the spec's `install` step), since every instance has its own checkout.

Environments are cached under `--env-dir` (default `$XDG_CACHE_HOME/clover/swebench-envs`),
keyed by repository, version and the spec's contents. One is recorded (`clover-env.json`) only
once it verifies (its python runs and is the spec's version; for a pytest command, it imports
pytest and `python -m pytest --version` works); a cached one is verified again once per process
and rebuilt when it fails. The installs and every run of a built interpreter are sandboxed
(buildbox.py): they run the code of the packages the repository names. `--python PATH` skips all this (evaluate.py runs the tests in an
overlay on top of that interpreter, interpreters.py). Conda-only specs (`environment.yml`)
cannot be reproduced here: their pip_packages are installed and the environment records a
warning (the docker harness is exact).
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

from clover_cli.modes.swebench.buildbox import confined_argv, local_sources, run_confined
from clover_cli.modes.swebench.interpreters import EnvError, find_python, not_found_message
from clover_cli.modes.swebench.specs import EvalSpec, is_pytest_cmd
from clover_cli.tools.statedir import cache_home

ENV_META = "clover-env.json"
_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_guard = threading.Lock()
_verified: dict[str, int] = {}  # env folder -> mtime_ns of the record verified in this process
__all__ = ["EnvError", "TestEnv", "ensure_env", "forced_env", "env_key", "default_env_dir"]


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
        run = dict(capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        try:
            if self.root is None:  # the user's own --python: nothing the repository installed
                proc = subprocess.run([str(self.python), "-c", f"import {name}"], env=self.environ(), **run)
            else:  # a built environment holds what the repository's requirements installed
                proc = run_confined(self.root, [str(self.python), "-c", f"import {name}"], self.environ(),
                                    readable=(_real_prefix(self.python),), **run)
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0


def default_env_dir() -> Path:
    """`$XDG_CACHE_HOME/clover/swebench-envs`."""
    return cache_home() / "swebench-envs"


def forced_env(python: str) -> TestEnv:
    """`--python`: this interpreter (a path or a name on PATH); nothing is installed into it (the
    tests run in an overlay on top of it, evaluate.py)."""
    found = shutil.which(python) if os.sep not in python else python
    if not found or not Path(found).exists():
        raise EnvError(f"--python {python!r} not found")
    # "+overlay": verdicts cached before the overlay existed graded the installed copy; re-grade
    return TestEnv(python=Path(os.path.abspath(found)), key=f"python:{found}+overlay")


def env_key(repo: str, version: str, spec: EvalSpec) -> str:
    """`owner__name-VERSION-HASH8`: the cache folder name of an environment."""
    digest = hashlib.sha256("\0".join([repo, version, *spec.env_key_parts()]).encode()).hexdigest()
    safe_version = "".join(c if c.isalnum() or c in "._" else "_" for c in version) or "noversion"
    return f"{repo.replace('/', '__')}-{safe_version}-{digest[:8]}"


def _real_prefix(python: Path) -> str:
    """The folder of the real interpreter a venv's python links to (bound read-only)."""
    return str(Path(os.path.realpath(python)).parent.parent)


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

    def run(self, argv: list[str], cwd: Path | None = None, timeout: float = 3600,
            env: dict | None = None, shown: list[str] | None = None) -> None:
        with open(self.build_log, "a", encoding="utf-8") as fh:
            fh.write("$ " + " ".join(shown or argv) + "\n")
            fh.flush()
            try:
                proc = subprocess.run(argv, cwd=str(cwd) if cwd else None, stdout=fh,
                                      stderr=subprocess.STDOUT, timeout=timeout,
                                      stdin=subprocess.DEVNULL, env=env)
            except (OSError, subprocess.SubprocessError) as exc:
                raise EnvError(f"{argv[0]} failed to run: {exc}") from None
        if proc.returncode != 0:
            raise EnvError(f"`{' '.join((shown or argv)[:4])} ...` failed (exit {proc.returncode}); "
                           f"see {self.build_log}")

    def create(self, version: str) -> Path:
        exe = _find_python(version, required=not self.uv)
        if self.uv:
            want = exe or version
            self.say(f"creating a virtual environment with uv (python {want or 'default'})")
            self.run([self.uv, "venv", "--quiet", "--seed", *(["--python", want] if want else []),
                      str(self.root)])
        else:
            self.say(f"creating a virtual environment with {exe} -m venv")
            self.run([exe, "-m", "venv", str(self.root)])
        return _venv_python(self.root)

    def pip(self, python: Path, args: list[str], what: str, requirements: str | None = None) -> None:
        """Install `args` into the environment, in the sandbox (buildbox.py): building a package
        runs its code. The cache is a folder beside the environments (the user's is read-only
        there)."""
        self.say(f"installing {what}")
        cache = self.root.parent / ".build-cache"
        cache.mkdir(parents=True, exist_ok=True)
        if self.uv:
            argv = [self.uv, "pip", "install", "--quiet", "--cache-dir", str(cache), "--python", str(python), *args]
        else:
            argv = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--cache-dir", str(cache), *args]
        readable = (_real_prefix(python), *local_sources(args, requirements))
        base = TestEnv(python=python, root=self.root).environ()
        boxed, env = confined_argv(self.root, argv, base, writable=(self.root, cache), readable=readable)
        self.run(boxed, env=env, shown=argv)


def _find_python(version: str, required: bool = True) -> str | None:
    """Clover's own interpreter when it is `version`, else one found on PATH, in pyenv's or
    uv's folders (interpreters.py); None (or EnvError when `required`) when there is none."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not version or version == here:
        return sys.executable
    found = find_python(version)
    if found is None and required:
        raise EnvError(not_found_message(version))
    return str(found) if found else None


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


def _has_commit(clone: Path, commit: str) -> bool:
    from clover_cli.modes.worktree import git  # the one hardened git runner

    return bool(commit) and git(clone, "cat-file", "-e", f"{commit}^{{commit}}",
                                check=False).returncode == 0


def _requirements_with_fallback(clone: Path, repo: str, setup_commit: str, base_commit: str,
                                notes: list[str]) -> tuple[str | None, str]:
    """(requirements text or None, the commit it was read at): at the environment_setup_commit,
    else (missing from the clone, as in a shallow clone, or no requirements file there) at the
    base commit, with a note saying so."""
    if not base_commit or base_commit == setup_commit:
        return _requirements(clone, repo, setup_commit), setup_commit
    if not _has_commit(clone, setup_commit):
        notes.append(f"environment_setup_commit {setup_commit[:12]} is not in the clone "
                     f"(a shallow clone?); reading the requirements at the base commit "
                     f"{base_commit[:12]}")
        return _requirements(clone, repo, base_commit), base_commit
    text = _requirements(clone, repo, setup_commit)
    if text is not None:
        return text, setup_commit
    notes.append(f"no requirements file at environment_setup_commit {setup_commit[:12]}; "
                 f"reading the requirements at the base commit {base_commit[:12]}")
    return _requirements(clone, repo, base_commit), base_commit


_PROBE = ("import sys; print('%d.%d' % sys.version_info[:2])\n"
          "try:\n    import pytest\nexcept Exception as e:\n    print('no pytest: %r' % e)\n"
          "else:\n    print('pytest ' + getattr(pytest, '__version__', '?'))\n")


def verify_env(python: Path, spec: EvalSpec) -> str | None:
    """Why the environment's interpreter cannot run the spec's tests, or None when it can: it
    runs, is the spec's Python version, and (a pytest test command) imports pytest and
    `python -m pytest --version` works."""
    env = TestEnv(python=python, root=python.parent.parent)
    run = dict(capture_output=True, text=True, errors="replace", timeout=300, stdin=subprocess.DEVNULL)

    def boxed(argv: list[str]) -> subprocess.CompletedProcess:  # what it installed runs: sandboxed
        return run_confined(env.root, argv, env.environ(), readable=(_real_prefix(python),), **run)
    try:
        probe = boxed([str(python), "-c", _PROBE])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"its python {python} does not run ({exc})"
    lines = probe.stdout.strip().splitlines()
    if probe.returncode != 0 or not lines:
        tail = (probe.stderr or probe.stdout).strip().splitlines()[-1:] or [f"exit {probe.returncode}"]
        return f"its python {python} does not run ({tail[0][:200]})"
    if spec.python and lines[0] != spec.python:
        return f"its python is {lines[0]}, the spec asks for {spec.python}"
    if not is_pytest_cmd(spec.test_cmd):
        return None
    if len(lines) < 2 or not lines[1].startswith("pytest "):
        return "it has no pytest (nothing installed it)"
    try:
        runner = boxed([str(python), "-m", "pytest", "--version"])
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`python -m pytest --version` did not run ({exc})"
    if runner.returncode != 0:
        tail = (runner.stderr or runner.stdout).strip().splitlines()[-1:] or [f"exit {runner.returncode}"]
        return f"`python -m pytest --version` failed ({tail[0][:200]})"
    return None


def _cached(root: Path, key: str, spec: EvalSpec, say) -> TestEnv | None:
    """The recorded environment at `root` if it still verifies (checked once per process)."""
    meta_path = root / ENV_META
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        env = TestEnv(python=Path(meta["python"]), root=root, key=key,
                      warnings=tuple(meta.get("warnings", ())))
        stamp = meta_path.stat().st_mtime_ns
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no record, or a broken one: build again
    if _verified.get(str(root)) == stamp:
        return env
    problem = verify_env(env.python, spec)
    if problem:
        say(f"the cached environment fails verification ({problem}); rebuilding it")
        return None
    _verified[str(root)] = stamp
    return env


def ensure_env(spec: EvalSpec, repo: str, version: str, clone: Path, commit: str,
               env_dir: Path | None = None, log: TextIO | None = None,
               base_commit: str | None = None) -> TestEnv:
    """The cached environment for repo + version, built first if needed (progress on `log`).

    `commit` is the instance's environment_setup_commit, `base_commit` its base commit (read
    instead when the first is not in the clone). An environment is recorded as built only once
    it verifies (verify_env); a cached one that no longer does is rebuilt. EnvError when the
    environment cannot be built or does not verify."""
    key = env_key(repo, version, spec)
    root = Path(env_dir or default_env_dir()).expanduser().resolve() / key
    with _guard:
        lock = _locks[key]
    with lock:
        builder = _Builder(root, log, key)
        found = _cached(root, key, spec, builder.say)
        if found is not None:
            return found
        if root.exists():
            shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        builder.build_log.unlink(missing_ok=True)
        python = builder.create(spec.python)
        warnings: list[str] = []
        notes: list[str] = []
        if spec.packages == "requirements.txt":
            text, at = _requirements_with_fallback(clone, repo, commit, base_commit or "", notes)
            for note in notes:
                builder.say("note: " + note)
            warnings.extend(notes)
            if text is None:
                warnings.append(f"no requirements file found at {at[:12]}")
            else:
                req = root / "clover-requirements.txt"
                req.write_text(text, encoding="utf-8")
                builder.pip(python, ["-r", str(req)], f"the requirements at {at[:12]}", requirements=text)
        elif spec.packages == "environment.yml":
            warnings.append("the spec's environment.yml is a conda environment; only its "
                            "pip_packages are installed locally (use --evaluate docker to be exact)")
        elif spec.packages.strip():
            builder.pip(python, spec.packages.split(), spec.packages)
        if spec.pip_packages:
            builder.pip(python, list(spec.pip_packages), " ".join(spec.pip_packages))
        for w in warnings:
            if w not in notes:
                builder.say("warning: " + w)
        problem = verify_env(python, spec)
        if problem:
            raise EnvError(f"environment {key} failed verification: {problem}; not recorded "
                           f"(the next evaluation rebuilds it); see {builder.build_log}")
        meta = {"repo": repo, "version": version, "python": str(python), "spec_source": spec.source,
                "python_version": spec.python, "warnings": warnings, "verified": True}
        meta_path = root / ENV_META
        meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        _verified[str(root)] = meta_path.stat().st_mtime_ns
        builder.say("ready")
        return TestEnv(python=python, root=root, key=key, warnings=tuple(warnings))
