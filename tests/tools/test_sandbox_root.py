"""Root inside the sandbox has no capabilities: the escapes a privileged process would use (remount
read-write, bind over the read-only tree, unmount the tmpfs hiding secrets, set the host name,
nest a user namespace) all fail and leave the tree as it was. Run as root where the suite runs as
root (CI does); a non-root run checks the same failures."""
from __future__ import annotations

import socket

import pytest

from clover_cli.tools import sandbox
from clover_cli.tools.shell import run_shell

from .conftest import snapshot

pytestmark = pytest.mark.skipif(not sandbox.status().available,
                                reason=f"no bubblewrap sandbox here: {sandbox.status().reason}")


@pytest.fixture(autouse=True)
def _fresh_probe(fresh_sandbox):
    pass


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME outside the repository holding secrets, named and unnamed."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY\n")
    (home / ".pgpass").write_text("db:5432:*:u:PGPASS-PW\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_root_escapes_fail_and_the_tree_stays(git_repo, home, profile):
    outside = home.parent / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    before, before_out, host = snapshot(git_repo), snapshot(outside), socket.gethostname()
    script = (
        f"grep CapEff /proc/self/status; "
        f"mount -o remount,rw / && echo REMOUNT-ROOT-OK; "
        f"mount -o remount,rw {outside} && echo REMOUNT-OUT-OK; "
        f"mount -o remount,bind,rw {git_repo} && echo REMOUNT-REPO-OK; "
        f"mount --bind /tmp {outside} && echo BIND-OK; "
        f"mount -t tmpfs none {outside} && echo TMPFS-OK; "
        f"umount -l {home} && echo UMOUNT-HOME-OK; umount -l /tmp && echo UMOUNT-TMP-OK; "
        f"cat {home}/.ssh/id_rsa {home}/.pgpass; "
        f"hostname sandbox-evil && echo HOSTNAME-OK; "
        f"unshare -rm sh -c 'mount -o remount,rw / && echo NESTED-OK'; "
        f"echo x > {outside}/keep.txt; echo x > {outside}/new.txt; echo done")
    res = run_shell(git_repo, script, sandbox_profile=profile)
    assert res.details["sandbox"] == f"bwrap:{profile}" and "done" in res.output, res.output
    assert "CapEff:\t0000000000000000" in res.output, res.output
    for word in ("REMOUNT-ROOT-OK", "REMOUNT-OUT-OK", "REMOUNT-REPO-OK", "BIND-OK", "TMPFS-OK",
                 "UMOUNT-HOME-OK", "UMOUNT-TMP-OK", "PRIVATE-KEY", "PGPASS-PW", "HOSTNAME-OK",
                 "NESTED-OK"):
        assert word not in res.output, (word, res.output)
    assert snapshot(outside) == before_out and snapshot(git_repo) == before
    assert socket.gethostname() == host


def test_a_repository_diff_driver_cannot_write_in_read_only_mode(git_repo, home):
    """The reported case: a diff driver the repository names, run by `git diff` in read-only mode,
    remounted the repository read-write and wrote to it. Now git never runs it (read-only git
    hardening), and it could not remount anyway."""
    marker = git_repo / "ESCAPED"
    driver = git_repo / "driver.sh"
    driver.write_text(f"#!/bin/sh\nmount -o remount,bind,rw {git_repo}; echo x > {marker}\ncat \"$1\"\n")
    driver.chmod(0o755)
    with open(git_repo / ".git" / "config", "a") as fh:
        fh.write(f"[diff \"evil\"]\n\ttextconv = {driver}\n")
    (git_repo / ".gitattributes").write_text("*.md diff=evil\n")
    (git_repo / "README.md").write_text("changed\n")
    for command in ("git diff", f"sh {driver} README.md"):
        res = run_shell(git_repo, command, sandbox_profile="read-only")
        assert res.details["sandbox"] == "bwrap:read-only"
        assert not marker.exists(), res.output
