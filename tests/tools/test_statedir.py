"""User state lives outside the repository, keyed by the repository's real path."""
from __future__ import annotations

import os
from pathlib import Path

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


def test_every_user_file_is_under_the_one_config_home(tmp_path, monkeypatch):
    """The trust list, the config file (settings loader and MCP) and the TUI's prefs all live in
    statedir.config_home(); a relative XDG_CONFIG_HOME is ignored for all of them, as XDG says."""
    from clover_cli.agent.mcp.config import user_config_path as mcp_config
    from clover_cli.config import user_config_path
    from clover_cli.tools.statedir import config_home
    from clover_cli.trust import trust_path
    from clover_cli.tui.prefs import prefs_path

    def paths():
        return [trust_path(), user_config_path(), mcp_config(), prefs_path()]

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_home() == tmp_path / "xdg" / "clover"
    assert paths() == [config_home() / n for n in ("trusted.json", "config.toml", "config.toml", "tui.json")]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/xdg")
    assert config_home() == tmp_path / "home" / ".config" / "clover"
    assert all(p.parent == config_home() for p in paths())


def test_on_linux_the_folders_are_platformdirs_own(tmp_path, monkeypatch):
    """tools/statedir.py's reason for not using platformdirs: on Linux its folders are these, with
    the XDG variables set, unset, or relative (ignored, as the spec says)."""
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("the claim is about Linux; macOS's platformdirs folders differ on purpose")
    platformdirs = pytest.importorskip("platformdirs")
    from clover_cli.tools.statedir import cache_home, config_home, state_home

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in (str(tmp_path / "xdg"), None, "relative/dir"):
        for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            if value is None:
                monkeypatch.delenv(var, raising=False)
            else:
                monkeypatch.setenv(var, value if value.startswith("rel") else f"{value}/{var}")
        assert config_home() == Path(platformdirs.user_config_dir("clover")), value
        assert state_home() == Path(platformdirs.user_state_dir("clover")), value
        assert cache_home() == Path(platformdirs.user_cache_dir("clover")), value
