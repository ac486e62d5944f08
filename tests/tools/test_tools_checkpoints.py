"""Checkpoints and undo: byte-for-byte restore after a sequence of edits, in and outside git,
without touching the user's branches, index or stash; refusing to overwrite later user edits."""
from __future__ import annotations


from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.gitutil import diff_against, status
from clover_cli.tools.registry import run_tool

from .conftest import commit_all, git, snapshot
from in_process import clover


def _edit_sequence(root):
    """Four tool calls of different kinds; returns the snapshots before each."""
    states = [snapshot(root)]
    assert run_tool("write_file", {"path": "new/dir/made.py", "content": "A = 1\n"}, root).ok
    states.append(snapshot(root))
    assert run_tool("edit_file", {"path": "keep.txt", "old": "two", "new": "TWO"}, root).ok
    states.append(snapshot(root))
    patch = ("--- a/keep.txt\n+++ b/keep.txt\n@@ -1,3 +1,3 @@\n one\r\n-TWO\r\n+2\r\n three\r\n"
             "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
    res = run_tool("apply_patch", {"patch": patch}, root)
    assert res.ok, res.output
    states.append(snapshot(root))
    assert run_tool("write_file", {"path": "new/dir/made.py", "content": "A = 2\n"}, root).ok
    return states


def _seed(root):
    (root / "keep.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (root / "gone.txt").write_bytes(b"bye\n")
    (root / "bin.dat").write_bytes(bytes(range(256)))


def test_undo_walks_back_outside_git(plain_dir):
    _seed(plain_dir)
    states = _edit_sequence(plain_dir)
    store = CheckpointStore(plain_dir)
    assert len(store.list()) == 4
    for expected in reversed(states):
        res = store.undo()
        assert res.ok, res.output
        assert snapshot(plain_dir) == expected
    assert not (plain_dir / "new").exists()  # directories the agent created are gone too
    res = store.undo()
    assert not res.ok and res.details["error"] == "no_checkpoint"


def test_undo_in_git_never_touches_branches_index_or_stash(git_repo):
    _seed(git_repo)
    commit_all(git_repo, "seed")
    (git_repo / "staged.txt").write_text("user's staged work\n")
    git(git_repo, "add", "staged.txt")
    git(git_repo, "stash", "list")
    head, index_before = git(git_repo, "rev-parse", "HEAD"), git(git_repo, "ls-files", "-s")
    branches = git(git_repo, "branch", "-a")
    states = _edit_sequence(git_repo)
    # Clover's own state is invisible to git
    assert all(".clover" not in e["path"] for e in status(git_repo))
    assert ".clover" not in diff_against(git_repo)
    for expected in reversed(states):
        assert CheckpointStore(git_repo).undo().ok
        assert snapshot(git_repo) == expected
    assert git(git_repo, "rev-parse", "HEAD") == head
    assert git(git_repo, "ls-files", "-s") == index_before
    assert git(git_repo, "branch", "-a") == branches
    assert git(git_repo, "stash", "list") == ""
    assert git(git_repo, "diff", "--cached", "--name-only") == "staged.txt\n"


def test_undo_refuses_when_user_changed_file_later(plain_dir):
    (plain_dir / "f.txt").write_text("original\n")
    assert run_tool("edit_file", {"path": "f.txt", "old": "original", "new": "agent"}, plain_dir).ok
    (plain_dir / "f.txt").write_text("the user's own edit\n")
    store = CheckpointStore(plain_dir)
    res = store.undo()
    assert not res.ok and res.details["conflicts"] == ["f.txt"] and "--force" in res.output
    assert (plain_dir / "f.txt").read_text() == "the user's own edit\n"
    assert store.undo(force=True).ok
    assert (plain_dir / "f.txt").read_text() == "original\n"


def test_undo_cli(plain_dir):
    (plain_dir / "f.txt").write_text("v1\n")
    assert run_tool("write_file", {"path": "f.txt", "content": "v2\n"}, plain_dir).ok
    (plain_dir / "f.txt").write_text("v3 by user\n")
    cmd = ["undo", "--root", str(plain_dir)]
    res = clover(*cmd)
    assert res.returncode == 1 and "--force" in res.stderr
    assert (plain_dir / "f.txt").read_text() == "v3 by user\n"
    res = clover(*cmd, "--force")
    assert res.returncode == 0 and "restored f.txt" in res.stdout
    assert (plain_dir / "f.txt").read_text() == "v1\n"
    res = clover(*cmd)
    assert res.returncode == 1 and "Nothing to undo" in res.stderr
