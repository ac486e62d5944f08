"""Every git Clover starts itself runs none of the programs a repository's config names: fsmonitor,
hooks, clean/smudge/process filters, diff textconv and command drivers, an external diff, merge
drivers, gpg, through any include. Real git, real hostile repositories, no sandbox involved."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clover_cli.agent.interface import repo_branch as ui_branch
from clover_cli.modes.fix import snapshots as gitsnap
from clover_cli.modes import worktree
from clover_cli.modes.swebench.environments import _git_show
from clover_cli.tools import githarden, gitutil
from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.files import repo_files
from clover_cli.tools.registry import run_tool

from .conftest import commit_all, git


def plant(repo: Path, markers: Path) -> None:
    """Make `repo` hostile: every program its config can name writes a file into `markers`.
    Its files are committed first, with the test's own git, before the config turns hostile."""
    (repo / ".gitattributes").write_text("*.f filter=f\n*.p filter=P\n*.t diff=tc\n*.e diff=ext\n"
                                         "*.i filter=inc\n*.c filter=cond\n*.m merge=m\n")
    for name in ("a.f", "b.p", "c.t", "d.e", "e.i", "f.c", "g.m"):
        (repo / name).write_text(f"{name} one\n")
    commit_all(repo, "files")
    markers.mkdir(exist_ok=True)
    prog = markers.parent / "prog.sh"
    prog.write_text(f"#!/bin/sh\ntouch {markers}/\"$CLOVER_WHO\"-$$\ncat \"${{1:-/dev/stdin}}\" 2>/dev/null\n")
    prog.chmod(0o755)
    hooks = markers.parent / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction",
                 "post-commit", "pre-auto-gc"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {markers}/hook-{name}\n")
        (hooks / name).chmod(0o755)

    def run(who: str) -> str:
        return f"env CLOVER_WHO={who} {prog}"

    gpg = markers.parent / "gpg.sh"  # gpg.program is run without a shell: a plain path
    gpg.write_text(f"#!/bin/sh\ntouch {markers}/gpg-$$\nexit 1\n")
    gpg.chmod(0o755)
    included = markers.parent / "included.cfg"
    included.write_text(f"[filter \"inc\"]\n\tclean = {run('inc-clean')}\n\tsmudge = {run('inc-smudge')}\n")
    conditional = markers.parent / "conditional.cfg"
    conditional.write_text(f"[filter \"cond\"]\n\tclean = {run('cond-clean')}\n\trequired = true\n")
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = {run('fsmonitor')}\n\thooksPath = {hooks}\n"
                 f"[filter \"f\"]\n\tclean = {run('clean')}\n\tsmudge = {run('smudge')}\n\trequired = true\n"
                 f"[filter \"P\"]\n\tprocess = {run('process')}\n"
                 f"[diff \"tc\"]\n\ttextconv = {run('textconv')}\n"
                 f"[diff \"ext\"]\n\tcommand = {run('diff-command')}\n"
                 f"[diff]\n\texternal = {run('diff-external')}\n"
                 f"[merge \"m\"]\n\tdriver = {run('merge')}\n"
                 f"[gpg]\n\tprogram = {gpg}\n[log]\n\tshowSignature = true\n"
                 f"[include]\n\tpath = {included}\n"
                 f"[includeIf \"onbranch:never-*\"]\n\tpath = {conditional}\n")


@pytest.fixture
def hostile(git_repo, tmp_path):
    markers = tmp_path / "markers"
    plant(git_repo, markers)
    with open(git_repo / ".git" / "config", "rb") as fh:
        assert b"fsmonitor" in fh.read()
    return git_repo, markers


def fired(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def test_the_planted_programs_do_run_under_plain_git(hostile):
    """The fixture is really hostile: plain git runs its programs (so the other tests mean something).
    A file is changed first, so `add` must clean it and write the index (its post-index-change
    hook) whatever the clock: an unchanged file whose stat data is not racily clean is not
    filtered again, which made this depend on how fast the fixture ran."""
    repo, markers = hostile
    (repo / "a.f").write_text("a.f two, longer than before\n")
    git(repo, "add", "-A", check=False)
    git(repo, "diff", "HEAD", check=False)
    assert any(n.startswith("clean") for n in fired(markers)) and any(n.startswith("hook-") or
                                                                        n.startswith("fsmonitor") for n in fired(markers))


def test_gitutil_and_the_repo_map_run_nothing(hostile):
    repo, markers = hostile
    assert gitutil.is_git_repo(repo) and gitutil.current_branch(repo) == "main" and ui_branch(repo) == "main"
    (repo / "a.f").write_text("a.f changed\n")
    (repo / "c.t").write_text("c.t changed\n")
    assert {e["path"] for e in gitutil.status(repo)} == {"a.f", "c.t"}
    diff = gitutil.diff_against(repo)
    assert "+a.f changed" in diff and "+c.t changed" in diff
    assert "a.f" in repo_files(repo)
    assert run_tool("repo_map", {}, repo).ok
    assert fired(markers) == []


def test_fix_snapshots_and_checkpoint_undo_run_nothing(hostile):
    repo, markers = hostile
    before = gitsnap.snapshot_tree(repo)
    assert run_tool("write_file", {"path": "c.t", "content": "c.t two\n"}, repo).ok
    assert run_tool("edit_file", {"path": "a.f", "old": "one", "new": "two"}, repo).ok
    after = gitsnap.snapshot_tree(repo)
    patch = gitsnap.diff_trees(repo, before, after)
    assert "+c.t two" in patch and "+a.f two" in patch
    assert CheckpointStore(repo).undo().ok and CheckpointStore(repo).undo().ok
    assert (repo / "a.f").read_text() == "a.f one\n"
    assert fired(markers) == []


def test_swebench_worktrees_run_nothing(hostile, tmp_path):
    repo, markers = hostile
    head = git(repo, "rev-parse", "HEAD").strip()
    assert worktree.find_clone(repo.parent, repo.name) == repo
    assert worktree.resolve_commit(repo, "HEAD") == head
    dest = worktree.add_worktree(repo, head, tmp_path / "wt")
    (dest / "c.t").write_text("changed\n")
    (dest / "new.f").write_text("new\n")
    patch = worktree.diff_worktree(dest, head)
    assert "+changed" in patch and "new.f" in patch
    assert worktree.apply_patch(dest, "")[0]
    assert _git_show(repo, head, "README.md") == "# demo\n"
    worktree.remove_worktree(repo, dest)
    assert fired(markers) == []


def test_the_overrides_name_every_driver_and_beat_the_config(hostile):
    repo, _ = hostile
    pairs = dict(githarden.config_pairs(repo))
    for key, value in (("filter.f.clean", ""), ("filter.P.process", ""), ("filter.inc.smudge", ""),
                       ("filter.cond.clean", ""), ("filter.cond.required", "false"),
                       ("diff.tc.textconv", "/dev/null"), ("diff.ext.command", "/dev/null"),
                       ("diff.external", "/dev/null"), ("merge.m.driver", "/dev/null"),
                       ("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"),
                       ("gpg.program", "/dev/null"), ("log.showSignature", "false")):
        assert pairs.get(key) == value, key
    env = githarden.hardened_env(repo, {**os.environ, "GIT_EXTERNAL_DIFF": "/bin/false"})
    assert "GIT_EXTERNAL_DIFF" not in env
    got = git(repo, "config", "filter.f.clean")  # the test's own git: the file still says so
    assert "prog.sh" in got
