"""Checkpoints are verified whole before undo restores anything: a missing, truncated or
bit-flipped blob, a damaged or forged manifest restores nothing and says so in one line; a write
that fails halfway rolls back and leaves no checkpoint behind."""
from __future__ import annotations

import json

import pytest

from clover_cli.tools.checkpoint_manifest import dump
from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

from .conftest import snapshot
from in_process import clover


def _two_file_checkpoint(root):
    """One apply_patch checkpoint holding two blobs; returns (store, checkpoint dir)."""
    (root / "a.txt").write_text("a1\n")
    (root / "b.txt").write_text("b1\n")
    patch = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a1\n+a2\n"
             "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b1\n+b2\n")
    res = run_tool("apply_patch", {"patch": patch}, root)
    assert res.ok, res.output
    store = CheckpointStore(root)
    (cp_id,) = store._ids()
    return store, store.directory / cp_id


def _blob(cp_dir, rel):
    manifest = json.loads((cp_dir / "manifest.json").read_text())
    entry = next(e for e in manifest["entries"] if e["path"] == rel)
    return cp_dir / "blobs" / entry["blob"]


def _damage_missing(cp_dir):
    _blob(cp_dir, "b.txt").unlink()


def _damage_truncated(cp_dir):
    _blob(cp_dir, "b.txt").write_bytes(b"b")


def _damage_bitflip(cp_dir):
    blob = _blob(cp_dir, "b.txt")
    data = bytearray(blob.read_bytes())
    data[0] ^= 0x01
    blob.write_bytes(bytes(data))


def _damage_manifest_json(cp_dir):
    (cp_dir / "manifest.json").write_text('{"version": 2, "entries": [')


def _damage_manifest_edit(cp_dir):  # a changed field without a matching digest
    manifest = json.loads((cp_dir / "manifest.json").read_text())
    manifest["entries"][0]["mode"] = 0o4777
    (cp_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("damage", [_damage_missing, _damage_truncated, _damage_bitflip,
                                    _damage_manifest_json, _damage_manifest_edit])
def test_damaged_checkpoint_restores_nothing(plain_dir, damage):
    store, cp_dir = _two_file_checkpoint(plain_dir)
    damage(cp_dir)
    before = snapshot(plain_dir)
    res = store.undo()
    assert not res.ok and res.details["error"] == "corrupt_checkpoint"
    assert "Nothing was restored" in res.output and "\n" not in res.output
    assert snapshot(plain_dir) == before  # neither a.txt nor b.txt was put back
    assert before["a.txt"] == b"a2\n" and before["b.txt"] == b"b2\n"


def test_clover_undo_exits_nonzero_on_a_truncated_blob(plain_dir):
    _, cp_dir = _two_file_checkpoint(plain_dir)
    _damage_truncated(cp_dir)
    res = clover("undo", "--root", str(plain_dir))
    assert res.returncode == 1 and "truncated" in res.stderr and "Traceback" not in res.stderr
    assert (plain_dir / "a.txt").read_text() == "a2\n" and (plain_dir / "b.txt").read_text() == "b2\n"


def test_forged_manifest_cannot_write_outside_the_root(plain_dir, tmp_path):
    """A manifest with a valid digest but a `..` path or a link out of the root is refused."""
    store, cp_dir = _two_file_checkpoint(plain_dir)
    manifest = json.loads((cp_dir / "manifest.json").read_text())
    manifest.pop("digest")
    for bad in ("../escaped.txt", "/tmp/escaped.txt", ".git/config", "x/./y"):
        manifest["entries"][0]["path"] = bad
        (cp_dir / "manifest.json").write_bytes(dump(manifest))
        res = store.undo(force=True)
        assert not res.ok and res.details["error"] == "corrupt_checkpoint", bad
    manifest["entries"][0] = {"path": "ln", "kind": "link", "link": "../../etc/passwd",
                              "after": None, "created_dir": None}
    (cp_dir / "manifest.json").write_bytes(dump(manifest))
    res = store.undo(force=True)
    assert not res.ok and "outside" in res.output
    assert not (tmp_path / "escaped.txt").exists() and not (plain_dir / "ln").exists()


def test_list_reports_and_skips_a_corrupt_manifest(plain_dir):
    store, cp_dir = _two_file_checkpoint(plain_dir)
    assert run_tool("write_file", {"path": "c.txt", "content": "c\n"}, plain_dir).ok
    _damage_manifest_json(cp_dir)
    listed = store.list()
    assert len(listed) == 1 and listed[0]["entries"][0]["path"] == "c.txt"
    assert len(store.problems) == 1 and "not valid JSON" in store.problems[0]
    assert store.undo().ok and not (plain_dir / "c.txt").exists()  # the intact newest one


def test_failed_write_rolls_back_and_leaves_no_checkpoint(plain_dir):
    """A patch whose second file cannot be written (its folder is a file) restores the first
    file, keeps no checkpoint, and later undos still work."""
    (plain_dir / "a.txt").write_text("I am a file\n")
    (plain_dir / "b.txt").write_text("b1\n")
    assert run_tool("write_file", {"path": "b.txt", "content": "b2\n"}, plain_dir).ok
    before = snapshot(plain_dir)
    patch = ("--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b2\n+b3\n"
             "--- /dev/null\n+++ b/a.txt/new.txt\n@@ -0,0 +1 @@\n+new\n")
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert not res.ok and res.details["error"] == "write" and "restored" in res.output
    assert snapshot(plain_dir) == before
    res = run_tool("write_file", {"path": "a.txt/new.txt", "content": "x"}, plain_dir)
    assert not res.ok and res.details["error"] == "edit_failed" and "a.txt is a file" in res.output
    store = CheckpointStore(plain_dir)
    assert len(store.list()) == 1
    res = store.undo()
    assert res.ok, res.output
    assert (plain_dir / "b.txt").read_text() == "b1\n"


def test_undo_of_a_group_is_all_or_nothing(plain_dir):
    """A damaged checkpoint inside a group stops the whole group's undo before any file."""
    (plain_dir / "a.txt").write_text("a0\n")
    store = CheckpointStore(plain_dir)
    with store.group("attempt"):
        for n in (1, 2, 3):
            assert run_tool("write_file", {"path": "a.txt", "content": f"a{n}\n"}, plain_dir).ok
    middle = store.directory / store._ids()[1]
    blob = next((middle / "blobs").iterdir())
    blob.write_bytes(b"zz")
    res = store.undo()
    assert not res.ok and res.details["error"] == "corrupt_checkpoint"
    assert (plain_dir / "a.txt").read_text() == "a3\n"
