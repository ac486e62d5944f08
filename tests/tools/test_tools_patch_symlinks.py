"""apply_patch deleting or renaming a symlink acts on the link, never on its target
(diffs made by real `git diff`; undo brings the link back)."""
from __future__ import annotations

import os

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import planned_writes, run_tool

from .conftest import commit_all, git


def _repo_with_link(git_repo):
    (git_repo / "real.txt").write_text("real content\nsecond\n")
    os.symlink("real.txt", git_repo / "alias.txt")
    commit_all(git_repo, "link")
    return git_repo


def _staged_diff(repo, *change: str) -> str:
    """The `git diff --cached -M` of a change made with git, then undone in index and tree."""
    git(repo, *change)
    diff = git(repo, "diff", "--cached", "-M")
    git(repo, "reset", "-q", "--hard")
    return diff


def test_deleting_a_link_removes_the_link_not_its_target(git_repo):
    repo = _repo_with_link(git_repo)
    patch = _staged_diff(repo, "rm", "-q", "alias.txt")
    assert "deleted file mode 120000" in patch
    assert planned_writes("apply_patch", {"patch": patch}, repo) == ["alias.txt"]
    res = run_tool("apply_patch", {"patch": patch}, repo)
    assert res.ok, res.output
    assert not os.path.lexists(repo / "alias.txt")
    assert (repo / "real.txt").read_text() == "real content\nsecond\n"
    undo = CheckpointStore(repo).undo()
    assert undo.ok, undo.output
    assert (repo / "alias.txt").is_symlink() and os.readlink(repo / "alias.txt") == "real.txt"


def test_plain_deletion_diff_of_a_link_by_its_target_content(plain_dir):
    (plain_dir / "real.txt").write_text("real content\n")
    os.symlink("real.txt", plain_dir / "alias.txt")
    patch = "--- a/alias.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-real content\n"
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert res.ok, res.output
    assert not os.path.lexists(plain_dir / "alias.txt")
    assert (plain_dir / "real.txt").read_text() == "real content\n"


def test_renaming_a_link_moves_the_link(git_repo):
    repo = _repo_with_link(git_repo)
    patch = _staged_diff(repo, "mv", "alias.txt", "renamed.txt")
    assert "rename from alias.txt" in patch
    res = run_tool("apply_patch", {"patch": patch}, repo)
    assert res.ok, res.output
    assert not os.path.lexists(repo / "alias.txt")
    assert (repo / "renamed.txt").is_symlink() and os.readlink(repo / "renamed.txt") == "real.txt"
    assert (repo / "real.txt").read_text() == "real content\nsecond\n"
    assert git(repo, "status", "--porcelain") != ""  # the tree changed...
    assert CheckpointStore(repo).undo().ok
    assert git(repo, "status", "--porcelain") == ""  # ...and undo put the link back exactly


def test_deleting_a_link_out_of_the_root_stays_refused(git_repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me\n")
    os.symlink(secret, git_repo / "out.txt")
    patch = "--- a/out.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep me\n"
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert not res.ok and "outside the repository root" in res.output
    assert secret.read_text() == "keep me\n" and (git_repo / "out.txt").is_symlink()
