"""Read-only mode without a sandbox (CLOVER_SANDBOX=off, or no bwrap): the git commands it allows
never run a program the repository names (external diff, textconv, filters, gpg, fsmonitor,
hooks). The shell gives git the same hardening as Clover's own runner (tools/githarden.py)."""
from __future__ import annotations

import subprocess

import pytest

from clover_cli.tools import sandbox
from clover_cli.tools.shell import run_shell

from .conftest import git
from .test_git_hardening import fired, plant


@pytest.fixture(autouse=True)
def _no_sandbox(monkeypatch):
    monkeypatch.setenv("CLOVER_SANDBOX", "off")
    sandbox.reset_probe()
    yield
    sandbox.reset_probe()


def _signed_head(repo) -> None:
    """Give HEAD a (fake) PGP signature, so `git log` with log.showSignature asks gpg."""
    body = git(repo, "cat-file", "commit", "HEAD")
    head, _, msg = body.partition("\n\n")
    signed = head + "\ngpgsig -----BEGIN PGP SIGNATURE-----\n AAAA\n -----END PGP SIGNATURE-----\n\n" + msg
    sha = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=repo,
                         input=signed.encode(), capture_output=True, check=True).stdout.decode().strip()
    git(repo, "-c", "core.hooksPath=/dev/null", "update-ref", "refs/heads/main", sha)


@pytest.mark.parametrize("command", [
    "git status", "git diff", "git diff HEAD --stat", "git log -p", "git show", "git show HEAD:c.t",
    "git blame c.t", "git cat-file --textconv HEAD:c.t", "git log", "git log --show-signature -1",
    "git diff --cached", "git grep one"])
def test_read_only_git_runs_no_repository_program(git_repo, tmp_path, command):
    markers = tmp_path / "markers"
    plant(git_repo, markers)
    _signed_head(git_repo)
    for name in ("a.f", "c.t", "d.e"):
        (git_repo / name).write_text(f"{name} changed\n")
    res = run_shell(git_repo, command, sandbox_profile="read-only")
    assert res.details["sandbox"] == "none"
    assert fired(markers) == [], res.output


def test_plain_git_would_have_run_them(git_repo, tmp_path):
    """Without the hardening the same commands do run the programs (the cases above are real)."""
    markers = tmp_path / "markers"
    plant(git_repo, markers)
    _signed_head(git_repo)
    (git_repo / "c.t").write_text("c.t changed\n")
    run_shell(git_repo, "git log --show-signature -1; git diff; git blame c.t", sandbox_profile="off")
    names = fired(markers)
    assert any(n.startswith("gpg") for n in names) and any(n.startswith("textconv") for n in names)
