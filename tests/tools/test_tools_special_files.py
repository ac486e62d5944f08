"""Symlinks that leave the root, FIFOs and encodings across read_file, list_files, grep and
repo_map (real git repos, real FIFOs, real ripgrep and the Python fallback)."""
from __future__ import annotations

import os
import shutil

import pytest

import clover_cli.tools.grep as grep_mod
from clover_cli.tools.registry import run_tool

from .conftest import git

# a lookahead makes ripgrep (without --pcre2) fail to compile, so grep falls back to Python
FALLBACK = "(?=root)root"


@pytest.fixture
def outside(tmp_path):
    """A directory next to the repository with a file full of secrets and a Python module."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("root:x:0:0:SECRET_ROOT_LINE\n")
    (d / "evil.py").write_text("def outside_secret_function():\n    return 1\n")
    return d


def _escape_links(root, outside):
    os.symlink(outside / "secret.txt", root / "leak")
    os.symlink(outside / "evil.py", root / "leak.py")
    os.symlink(outside, root / "outdir")
    (root / "inside.txt").write_text("root inside\n")
    os.symlink("inside.txt", root / "alias.txt")  # a link that stays inside is fine


def test_grep_never_reads_through_links_out_of_the_root(git_repo, outside):
    _escape_links(git_repo, outside)
    git(git_repo, "add", "leak", "leak.py", "outdir", "inside.txt", "alias.txt")
    for pattern in (FALLBACK, "root", "(?=S)SECRET|outside_secret"):
        res = run_tool("grep", {"pattern": pattern}, git_repo)
        assert res.ok and "x:0:0" not in res.output and "def outside" not in res.output
    assert run_tool("grep", {"pattern": "SECRET|def outside"}, git_repo).details["matches"] == 0
    assert run_tool("grep", {"pattern": "(?=S)SECRET|def outside"},
                    git_repo).details["matches"] == 0
    res = run_tool("grep", {"pattern": FALLBACK}, git_repo)
    assert res.details["engine"] == "python" and "inside.txt:1: root inside" in res.output
    if not shutil.which("rg"):  # without ripgrep the inside link is still searched; with it,
        # the Python engine reads ripgrep's file set (links not followed), as ripgrep does
        assert "alias.txt:1: root inside" in res.output
    if shutil.which("rg"):
        res = run_tool("grep", {"pattern": "root"}, git_repo)
        assert res.details["engine"] == "ripgrep" and "inside.txt:1" in res.output


def test_python_grep_skips_links_out_of_the_root_in_a_plain_dir(plain_dir, outside,
                                                               monkeypatch):
    _escape_links(plain_dir, outside)
    monkeypatch.setattr(grep_mod.shutil, "which", lambda name: None)  # no ripgrep installed
    res = run_tool("grep", {"pattern": "root|SECRET"}, plain_dir)
    assert res.ok and res.details["engine"] == "python"
    assert "SECRET" not in res.output and "inside.txt:1" in res.output


def test_list_files_and_repo_map_skip_links_out_of_the_root(git_repo, outside):
    _escape_links(git_repo, outside)
    (git_repo / "mod.py").write_text("def inside_function():\n    return 2\n")
    git(git_repo, "add", "-A")
    listed = run_tool("list_files", {}, git_repo)
    assert listed.ok and "leak" not in listed.details["files"]
    assert "leak.py" not in listed.details["files"] and "alias.txt" in listed.details["files"]
    res = run_tool("repo_map", {}, git_repo)
    assert res.ok and "inside_function" in res.output
    assert "outside_secret_function" not in res.output and "leak.py" not in res.output


@pytest.mark.timeout(120)  # a hang guard: a FIFO opened for reading blocks forever; healthy is ~1 s
def test_fifo_never_blocks_any_tool(plain_dir, monkeypatch):
    os.mkfifo(plain_dir / "pipe.py")
    os.mkfifo(plain_dir / "pipe.txt")
    (plain_dir / "real.py").write_text("def real_function():\n    return 'root'\n")
    listed = run_tool("list_files", {}, plain_dir)
    assert listed.ok and listed.details["files"] == ["real.py"]
    res = run_tool("grep", {"pattern": FALLBACK}, plain_dir)
    assert res.ok and res.details["engine"] == "python" and "real.py:2" in res.output
    res = run_tool("grep", {"pattern": "root"}, plain_dir)
    assert res.ok and "real.py:2" in res.output
    res = run_tool("grep", {"pattern": "root", "path": "pipe.txt"}, plain_dir)
    assert not res.ok and "not a regular file" in res.output
    monkeypatch.setattr(grep_mod.shutil, "which", lambda name: None)
    assert "real.py:2" in run_tool("grep", {"pattern": "root"}, plain_dir).output
    res = run_tool("repo_map", {}, plain_dir)
    assert res.ok and "real_function" in res.output
    res = run_tool("read_file", {"path": "pipe.txt"}, plain_dir)
    assert not res.ok and res.details["error"] == "not_regular" and "not a regular file" in res.output


def test_read_file_shows_latin1_the_way_edit_file_matches_it(plain_dir):
    (plain_dir / "l1.txt").write_bytes("caf\u00e9 au lait\nna\u00efve\n".encode("latin-1"))
    res = run_tool("read_file", {"path": "l1.txt"}, plain_dir)
    assert res.ok and res.output == "     1\tcaf\u00e9 au lait\n     2\tna\u00efve"
    assert res.details["encoding"] == "latin-1"
    # what read_file showed is what edit_file matches, and the file stays latin-1
    line = res.output.split("\n")[0].split("\t", 1)[1]
    assert run_tool("edit_file", {"path": "l1.txt", "old": line, "new": "th\u00e9"}, plain_dir).ok
    assert (plain_dir / "l1.txt").read_bytes() == "th\u00e9\nna\u00efve\n".encode("latin-1")
    (plain_dir / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    res = run_tool("read_file", {"path": "bom.txt"}, plain_dir)
    assert res.output == "     1\thello" and res.details["encoding"] == "utf-8-sig"


def test_read_file_past_the_end_counts_lines_with_end_line(plain_dir):
    (plain_dir / "a.txt").write_text("one\ntwo\n")
    for args in ({"start_line": 5, "end_line": 9}, {"start_line": 5}):
        res = run_tool("read_file", {"path": "a.txt", **args}, plain_dir)
        assert not res.ok and res.details["error"] == "bad_range"
        assert "a.txt has only 2 lines; start_line 5 is past the end" in res.output
        assert res.details["total_lines"] == 2


@pytest.mark.timeout(120)  # a hang guard: opening the FIFO would block forever
def test_edit_and_write_on_a_fifo_say_what_it_is(plain_dir):
    os.mkfifo(plain_dir / "pipe.txt")
    for name, args in (("edit_file", {"path": "pipe.txt", "old": "a", "new": "b"}),
                       ("write_file", {"path": "pipe.txt", "content": "x"})):
        res = run_tool(name, args, plain_dir)
        assert not res.ok and res.details["error"] == "edit_failed", res.output
        assert "not a regular file" in res.output and "FIFO" in res.output
        assert "does not exist" not in res.output
    assert os.path.exists(plain_dir / "pipe.txt") and not (plain_dir / "pipe.txt").is_file()


@pytest.mark.parametrize("tool", ["write_file", "edit_file", "apply_patch", "read_file"])
def test_a_file_name_over_255_bytes_is_a_tool_error(plain_dir, tool):
    name = "n" * 300 + ".txt"
    args = {"write_file": {"path": name, "content": "x"},
            "edit_file": {"path": name, "old": "a", "new": "b"},
            "apply_patch": {"patch": f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"},
            "read_file": {"path": name}}[tool]
    res = run_tool(tool, args, plain_dir)
    assert not res.ok and res.details.get("error") != "internal", res.output
    assert "255" in res.output
