"""Git hardening fails closed: when `git config --list` fails or times out, the git call it was
for does not run (a repository's filter would otherwise run unneutralised). Real git behind a
wrapper that breaks only the listing; real processes."""
from __future__ import annotations

import shutil

import pytest

from clover_cli.tools import githarden, gitutil
from clover_cli.tools.shell import run_shell

from .conftest import commit_all


@pytest.fixture
def hostile(git_repo, tmp_path):
    """A repository whose clean filter writes a marker file (committed before it turns hostile)."""
    (git_repo / ".gitattributes").write_text("*.f filter=evil\n")
    (git_repo / "a.f").write_text("one\n")
    commit_all(git_repo)
    marker = tmp_path / "filter-ran"
    with open(git_repo / ".git" / "config", "a") as fh:
        fh.write(f"[filter \"evil\"]\n\tclean = sh -c 'touch {marker}; cat'\n")
    (git_repo / "a.f").write_text("two\n")
    return git_repo, marker


def broken_listing(tmp_path, monkeypatch, body: str) -> None:
    """A `git` first on PATH that runs `body` for `git config ... --list` and real git otherwise."""
    real = shutil.which("git")
    wrapper = tmp_path / "wrapbin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\ncase \"$*\" in config*--list*) {body};; esac\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:" + __import__("os").environ["PATH"])


@pytest.mark.parametrize("body", ["echo broken >&2; exit 1", "exec sleep 5"])
def test_a_listing_that_fails_or_times_out_means_git_does_not_run(hostile, tmp_path, monkeypatch, body):
    repo, marker = hostile
    broken_listing(tmp_path, monkeypatch, body)
    monkeypatch.setattr(githarden, "LIST_TIMEOUT", 0.5)
    res = gitutil.git_run(repo, "add", "-A")
    assert not marker.exists()
    assert res.returncode == 128 and b"git config --list" in res.stderr, res
    with pytest.raises(githarden.HardeningError):
        githarden.hardened_env(repo)


def test_a_read_only_shell_command_is_not_run_without_the_hardening(hostile, tmp_path, monkeypatch):
    repo, marker = hostile
    broken_listing(tmp_path, monkeypatch, "exit 1")
    res = run_shell(repo, "git add -A; echo RAN", sandbox_profile="read-only")
    assert not res.ok and res.details["error"] == "git_hardening", res.output
    assert "RAN" not in res.output and not marker.exists()
