"""Checkpoint groups: every write of one `clover fix` attempt is undone by one `undo()`."""
from __future__ import annotations

import json

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

from .conftest import commit_all, snapshot


def _seed(root):
    (root / "a.py").write_text("A = 1\n")
    (root / "b.txt").write_bytes(b"one\r\ntwo\r\n")


def test_group_is_undone_in_one_call(git_repo):
    _seed(git_repo)
    commit_all(git_repo, "seed")
    assert run_tool("edit_file", {"path": "a.py", "old": "1", "new": "0"}, git_repo).ok
    before_group = snapshot(git_repo)
    store = CheckpointStore(git_repo)
    with store.group("fix attempt 1") as gid:
        assert isinstance(gid, str) and gid
        marker = json.loads((store.directory / "active_group.json").read_text())
        assert marker["id"] == gid
        assert run_tool("edit_file", {"path": "a.py", "old": "0", "new": "2"}, git_repo).ok
        assert run_tool("write_file", {"path": "pkg/new.py", "content": "X\n"}, git_repo).ok
        assert run_tool("edit_file", {"path": "b.txt", "old": "two", "new": "TWO"}, git_repo).ok
        assert run_tool("edit_file", {"path": "a.py", "old": "2", "new": "3"}, git_repo).ok
    assert not (store.directory / "active_group.json").exists()
    groups = [m.get("group") for m in store.list()]
    assert groups == [None, gid, gid, gid, gid]
    res = CheckpointStore(git_repo).undo()
    assert res.ok, res.output
    assert snapshot(git_repo) == before_group and not (git_repo / "pkg").exists()
    assert res.details["group"] == gid and res.details["checkpoints"] == [2, 3, 4, 5]
    assert res.details["restored"] == ["a.py", "b.txt"] and res.details["removed"] == ["pkg/new.py"]
    assert "fix attempt 1" in res.output and "a.py" in res.output and "pkg/new.py" in res.output
    assert "1 earlier checkpoint remains." in res.output
    # the ungrouped checkpoint before it behaves as before: one call, one checkpoint
    res = CheckpointStore(git_repo).undo()
    assert res.ok and "group" not in res.details and (git_repo / "a.py").read_text() == "A = 1\n"


def test_two_groups_walk_back_one_at_a_time(plain_dir):
    _seed(plain_dir)
    states = [snapshot(plain_dir)]
    store = CheckpointStore(plain_dir)
    for k in (1, 2):
        store.begin_group(f"attempt {k}")
        assert run_tool("write_file", {"path": "a.py", "content": f"A = {k}0\n"}, plain_dir).ok
        assert run_tool("write_file", {"path": f"n{k}.py", "content": "N\n"}, plain_dir).ok
        store.end_group()
        states.append(snapshot(plain_dir))
    assert run_tool("write_file", {"path": "a.py", "content": "after\n"}, plain_dir).ok
    assert store.undo().ok and snapshot(plain_dir) == states[2]  # ungrouped, alone
    assert store.undo().ok and snapshot(plain_dir) == states[1]
    assert store.undo().ok and snapshot(plain_dir) == states[0]
    assert store.undo().details["error"] == "no_checkpoint"


def test_group_undo_refuses_when_the_user_changed_a_file(plain_dir):
    _seed(plain_dir)
    store = CheckpointStore(plain_dir)
    with store.group("attempt"):
        assert run_tool("write_file", {"path": "a.py", "content": "A = 5\n"}, plain_dir).ok
        assert run_tool("write_file", {"path": "b.txt", "content": "mid\n"}, plain_dir).ok
        assert run_tool("write_file", {"path": "b.txt", "content": "agent\n"}, plain_dir).ok
    (plain_dir / "b.txt").write_text("user\n")
    res = store.undo()
    assert not res.ok and res.details["conflicts"] == ["b.txt"] and "--force" in res.output
    assert (plain_dir / "a.py").read_text() == "A = 5\n"  # nothing restored
    res = store.undo(force=True)
    assert res.ok and (plain_dir / "b.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (plain_dir / "a.py").read_text() == "A = 1\n"


def test_group_marker_of_another_process_is_ignored(plain_dir):
    _seed(plain_dir)
    store = CheckpointStore(plain_dir)
    store.begin_group("mine")
    store.end_group()
    marker = store.directory / "active_group.json"
    marker.write_text(json.dumps({"id": "gother", "label": "x", "pid": 1}))
    assert run_tool("write_file", {"path": "a.py", "content": "A = 9\n"}, plain_dir).ok
    assert store.list()[-1].get("group") is None
