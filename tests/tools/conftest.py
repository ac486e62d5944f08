"""Fixtures for the tools tests: real git repositories and plain directories in tmp dirs."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run git in `repo` and return stdout (raw text, newlines kept)."""
    res = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV},
                         capture_output=True, check=check)
    return res.stdout.decode()


def commit_all(repo: Path, message: str = "c") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git repository with an initial commit on branch `main`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    (repo / "README.md").write_text("# demo\n")
    commit_all(repo, "init")
    return repo


@pytest.fixture
def plain_dir(tmp_path: Path) -> Path:
    """A directory that is not a git repository."""
    d = tmp_path / "plain"
    d.mkdir()
    return d


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (except .git and .clover) with its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith((".git/", ".clover/")) or rel in (".git", ".clover") or not p.is_file():
            continue
        out[rel] = p.read_bytes()
    return out


@pytest.fixture
def fresh_sandbox(monkeypatch):
    """The sandbox as the machine gives it (CLOVER_SANDBOX unset), probed anew for the test and
    after it (the probe is cached per process)."""
    from clover_cli.tools import sandbox

    monkeypatch.delenv("CLOVER_SANDBOX", raising=False)
    sandbox.reset_probe()
    yield
    sandbox.reset_probe()
