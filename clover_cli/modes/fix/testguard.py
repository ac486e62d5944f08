"""Which files make up "the test" in `clover fix`, and a guard that keeps them unchanged.

The agent's writing tools refuse protected paths (AgentConfig.protected_paths), but a shell
command can still write them; the guard snapshots their bytes and restores them after each turn.
Protected: the test file(s) named by TEST, and in every folder between them and the root the
files that shape how pytest runs them: conftest.py and the configuration files pytest reads
(pytest.ini, .pytest.ini, pyproject.toml, tox.ini, setup.cfg) — existing or not: a new
conftest.py or pytest.ini could skip or deselect the test.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

SKIP_DIRS = {".git", ".clover", ".venv", "venv", "node_modules", "__pycache__", "site-packages",
             ".tox", ".nox", "build", "dist"}
MAX_FALLBACK_FILES = 2000
# Per folder, what pytest reads besides the tests: conftest.py, then the config files it
# searches for its inifile/rootdir (pytest docs, "Configuration: initialization").
GUARD_NAMES = ("conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _is_test_name(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                      or name == "conftest.py")


def _inside(root: Path, path: Path) -> str | None:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _folder_guards(root: Path, start: Path) -> list[str]:
    """conftest.py and the pytest config files of every folder from `start` up to root."""
    out: list[str] = []
    folder = start if start.is_dir() else start.parent
    folder = folder.resolve()
    while True:
        if _inside(root, folder) is None:
            break
        out.extend(rel for name in GUARD_NAMES
                   if (rel := _inside(root, folder / name)) is not None)
        if folder == root:
            break
        folder = folder.parent
    return out


def _fallback(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if _is_test_name(name):
                found.append(Path(dirpath, name).relative_to(root).as_posix())
                if len(found) >= MAX_FALLBACK_FILES:
                    return found
    return found


def protected_test_paths(test: str, root: Path) -> list[str]:
    """Repo-relative paths the agent must not change while fixing TEST.

    TEST may be a node id (`tests/test_x.py::test_y`), a file or folder, or an option expression
    (`-k name`); with no path in it, every test_*.py / *_test.py / conftest.py under root counts,
    and the root's pytest config files.
    """
    root = Path(root).resolve()
    tokens = shlex.split(test) if test.lstrip().startswith("-") else [test]
    paths: list[str] = []
    for tok in tokens:
        if tok.startswith("-"):
            continue
        candidate = root / tok.split("::", 1)[0]
        rel = _inside(root, candidate)
        if rel is None or rel == "." or not candidate.exists():
            continue
        paths.append(rel)
        paths.extend(_folder_guards(root, candidate))
    if not paths:
        paths = _fallback(root) + _folder_guards(root, root)
    return list(dict.fromkeys(paths))


class TestFileGuard:
    """Remembers the bytes of protected files and puts them back when they change."""

    __test__ = False  # not a pytest test class

    def __init__(self, root: Path, paths: list[str]):
        self.root = Path(root).resolve()
        self.paths = list(paths)
        self._saved: dict[str, bytes | None] = {}
        self._dirs = [p for p in self.paths if (self.root / p).is_dir()]
        for rel in self._files():
            self._saved[rel] = self._read(rel)

    def _files(self) -> list[str]:
        files = [p for p in self.paths if p not in self._dirs]
        for d in self._dirs:
            for dirpath, dirnames, filenames in os.walk(self.root / d):
                dirnames[:] = [n for n in dirnames if n != "__pycache__"]
                files.extend(Path(dirpath, n).relative_to(self.root).as_posix()
                             for n in filenames if not n.endswith((".pyc", ".pyo")))
        return files

    def _read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def restore(self) -> list[str]:
        """Undo every change to the protected files; returns the paths that were restored."""
        restored: list[str] = []
        for rel in sorted(set(self._files()) | set(self._saved)):
            before = self._saved.get(rel)
            now = self._read(rel)
            if now == before:
                continue
            target = self.root / rel
            if before is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(before)
            restored.append(rel)
        return restored
