"""User state lives outside the repository, keyed by the repository's real path."""
from __future__ import annotations

import os

from clover_cli.tools.statedir import repo_cache_dir, repo_key, repo_state_dir


def test_state_and_cache_dirs_are_outside_the_repo_and_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ca"))
    repo = tmp_path / "repo"
    repo.mkdir()
    state = repo_state_dir(repo, "sessions")
    cache = repo_cache_dir(repo)
    assert state.is_dir() and cache.is_dir()
    assert str(state).startswith(str(tmp_path / "st" / "clover" / "repos"))
    assert str(cache).startswith(str(tmp_path / "ca" / "clover" / "repos"))
    assert repo not in state.parents and repo not in cache.parents
    assert state.stat().st_mode & 0o777 == 0o700


def test_key_follows_the_real_path(tmp_path):
    a, b = tmp_path / "a" / "proj", tmp_path / "b" / "proj"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    os.symlink(a, tmp_path / "link")
    assert repo_key(a) == repo_key(tmp_path / "link")
    assert repo_key(a) != repo_key(b)
    assert repo_key(a).startswith("proj-")


def test_relative_xdg_value_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert repo_state_dir(tmp_path / "r", create=False).is_relative_to(tmp_path / ".local" / "state")
