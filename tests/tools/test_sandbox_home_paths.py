"""PATH entries bound back into the hidden $HOME are resolved first: only a folder inside $HOME
that is a toolchain folder or has no hidden component is bound (tools/sandbox.py,
`toolchain_paths`). Symlinks, `..`, `//` and trailing slashes cannot widen what a sandboxed
command sees. Real bubblewrap, real processes."""
from __future__ import annotations

import os

import pytest

from clover_cli.tools import sandbox
from clover_cli.tools.shell import run_shell

needs_bwrap = pytest.mark.skipif(not sandbox.status().available,
                                 reason=f"no bubblewrap sandbox here: {sandbox.status().reason}")


@pytest.fixture(autouse=True)
def _fresh(fresh_sandbox):
    pass


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME with secrets under hidden folders, a real toolchain and a plain ~/tools/bin."""
    home = tmp_path / "home"
    for rel, text in ((".pgpass", "PGPASS-SECRET\n"), (".local/share/keyrings/login", "KEYRING-SECRET\n"),
                      (".local/state/clover/note", "STATE-SECRET\n"), (".ssh/id_rsa", "SSH-SECRET\n"),
                      (".local/lib/site.txt", "LOCAL-LIB-VISIBLE\n")):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    for rel in (".cargo/bin/cargotool", "tools/bin/plaintool"):
        tool = home / rel
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text(f"#!/bin/sh\necho {tool.name.upper()}-RUNS\n")
        tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return home


def bound(home) -> list[str]:
    return [p for p, _ in sandbox.toolchain_paths(str(home), sandbox._secret_paths())]


@pytest.mark.parametrize("entry", ["{h}//.local", "{h}/.local/", "{h}/.local//share", "{h}/.cargo/bin/../..",
                                   "{h}/tools/../.ssh", "{h}/", "{h}//", "{h}/rootlink", "{h}/sshlink"])
def test_a_path_entry_that_resolves_to_no_toolchain_folder_is_not_bound(home, monkeypatch, entry):
    (home / "rootlink").symlink_to("/")
    (home / "sshlink").symlink_to(home / ".ssh")
    monkeypatch.setenv("PATH", entry.format(h=home) + os.pathsep + "/usr/bin:/bin")
    paths = bound(home)
    real = os.path.realpath(entry.format(h=home))
    assert real not in paths and str(home / ".local") not in paths and "/" not in paths, paths
    assert all(p.startswith(str(home) + "/") for p in paths), paths


def test_plain_and_toolchain_folders_are_bound_resolved(home, monkeypatch):
    (home / "bin").symlink_to(home / "tools" / "bin")
    monkeypatch.setenv("PATH", f"{home}/bin/:{home}//.cargo//bin/:/usr/bin:/bin")
    chains = dict(sandbox.toolchain_paths(str(home), sandbox._secret_paths()))
    assert str(home / "tools" / "bin") in chains and chains[str(home / "tools" / "bin")] == str(home / "bin")
    assert str(home / ".cargo" / "bin") in chains


def test_a_toolchain_folder_linked_to_a_secret_is_not_bound(home, monkeypatch):
    (home / ".cargo" / "bin" / "cargotool").unlink()
    (home / ".cargo" / "bin").rmdir()
    (home / ".cargo" / "bin").symlink_to(home / ".ssh")
    monkeypatch.setenv("PATH", f"{home}/.cargo/bin:/usr/bin:/bin")
    assert str(home / ".ssh") not in bound(home)


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_a_sandboxed_command_cannot_reach_secrets_through_path_entries(git_repo, home, monkeypatch, profile):
    (home / "bin").symlink_to("/")
    (home / "plain").symlink_to(home / "tools" / "bin")
    monkeypatch.setenv("PATH", os.pathsep.join([f"{home}//.local", f"{home}/.local/", f"{home}/bin",
                                                f"{home}/.cargo/bin/../..", f"{home}/plain/",
                                                f"{home}/.cargo/bin", "/usr/bin", "/bin"]))
    res = run_shell(git_repo, f"cat ~/bin{home}/.pgpass ~/.local/share/keyrings/login ~/.local/state/clover/note "
                              f"~/.ssh/id_rsa ~/.pgpass ~/.local/lib/site.txt; cargotool; plaintool",
                    sandbox_profile=profile)
    assert res.details["sandbox"] == f"bwrap:{profile}"
    for secret in ("PGPASS-SECRET", "KEYRING-SECRET", "STATE-SECRET", "SSH-SECRET"):
        assert secret not in res.output, res.output
    for visible in ("LOCAL-LIB-VISIBLE", "CARGOTOOL-RUNS", "PLAINTOOL-RUNS"):
        assert visible in res.output, res.output
