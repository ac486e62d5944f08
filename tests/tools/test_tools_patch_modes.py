"""apply_patch never applies a patch header's mode as written: new files get 0644/0755, existing
files keep their mode and only gain or lose the executable bits; symlinks in patches are refused
or keep pointing inside the root; a hunk with repeated context goes where its header says."""
from __future__ import annotations

import os
import stat

import pytest

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

from .conftest import commit_all, git


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("header, expected", [("104755", 0o755), ("102755", 0o755),
                                              ("101777", 0o755), ("100666", 0o644),
                                              ("100600", 0o644), ("100777", 0o755)])
def test_new_file_modes_are_0644_or_0755(plain_dir, header, expected):
    patch = (f"diff --git a/n.sh b/n.sh\nnew file mode {header}\n--- /dev/null\n+++ b/n.sh\n"
             "@@ -0,0 +1 @@\n+echo hi\n")
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert res.ok, res.output
    assert _mode(plain_dir / "n.sh") == expected


def test_existing_file_keeps_its_mode_and_only_toggles_exec(plain_dir):
    f = plain_dir / "run.sh"
    f.write_text("echo one\n")
    f.chmod(0o640)
    patch = ("diff --git a/run.sh b/run.sh\nold mode 100640\nnew mode 104777\n")
    patch += "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo one\n+echo two\n"
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert res.ok, res.output
    assert _mode(f) == 0o750 and f.read_text() == "echo two\n"  # x where r, nothing else
    patch = "diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100666\n"
    assert run_tool("apply_patch", {"patch": patch}, plain_dir).ok
    assert _mode(f) == 0o640


def test_renamed_file_mode_comes_from_the_file_not_the_header(plain_dir):
    (plain_dir / "a.py").write_text("x = 1\n")
    (plain_dir / "a.py").chmod(0o644)
    patch = ("diff --git a/a.py b/b.py\nold mode 100644\nnew mode 106777\nsimilarity index 100%\n"
             "rename from a.py\nrename to b.py\n")
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert res.ok, res.output
    assert _mode(plain_dir / "b.py") == 0o755 and not (plain_dir / "a.py").exists()


def test_a_new_symlink_in_a_patch_is_refused(git_repo, tmp_path):
    patch = ("diff --git a/ln b/ln\nnew file mode 120000\n--- /dev/null\n+++ b/ln\n"
             "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert not res.ok and "symlink" in res.output and "Nothing was changed" in res.output
    assert not os.path.lexists(git_repo / "ln")


def test_renaming_a_link_into_a_subfolder_keeps_it_pointing_inside(git_repo, tmp_path):
    """`alias -> real.txt` renamed to `deep/er/alias` would point at deep/er/real.txt; a link
    `up -> ../x` renamed into the root's top would point outside. Both are re-aimed at the
    same file inside the root."""
    (git_repo / "real.txt").write_text("real\n")
    (git_repo / "sub").mkdir()
    os.symlink("../real.txt", git_repo / "sub" / "up")
    commit_all(git_repo, "links")
    git(git_repo, "mv", "sub/up", "top")
    patch = git(git_repo, "diff", "--cached", "-M")
    git(git_repo, "reset", "-q", "--hard")
    assert "rename from sub/up" in patch
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    link = git_repo / "top"
    assert link.is_symlink() and os.readlink(link) == "real.txt"
    assert os.path.realpath(link) == str((git_repo / "real.txt").resolve())
    assert CheckpointStore(git_repo).undo().ok
    assert os.readlink(git_repo / "sub" / "up") == "../real.txt" and not os.path.lexists(link)


def test_nearest_match_carries_the_offset_of_earlier_hunks(plain_dir):
    """The diff was made before six lines were added at the top: hunk 1 applies 6 lines later
    than stated, so hunk 2 (stated at block 1's line, meant for block 3) goes 6 lines later too,
    to block 3, as GNU patch and `git apply` place it, not to the block at its literal line."""
    block = "def f():\n    return 1\n\n"
    (plain_dir / "m.py").write_text("x\n" * 6 + "# head\n" + block * 3)
    patch = ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,3 @@\n # head\n+import os\n def f():\n"
             "@@ -8,3 +9,3 @@\n def f():\n-    return 1\n+    return 3\n \n")
    res = run_tool("apply_patch", {"patch": patch}, plain_dir)
    assert res.ok, res.output
    text = (plain_dir / "m.py").read_text()
    assert text == "x\n" * 6 + "# head\nimport os\n" + block * 2 + block.replace("1", "3")
