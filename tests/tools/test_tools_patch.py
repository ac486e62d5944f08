"""apply_patch against real diffs produced by `git diff` and `diff -u` between real files."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

from .conftest import commit_all, git, snapshot

BASE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30))


def make_diff(repo: Path, edit) -> str:
    """Apply `edit(repo)` to the committed tree, capture `git diff`, then restore the commit."""
    edit(repo)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "-M")
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-qfd")
    return diff


def test_git_diff_multi_file_modify_create_delete_rename(git_repo):
    (git_repo / "a.py").write_text(BASE)
    (git_repo / "old_name.py").write_text("VALUE = 1\nOTHER = 2\n" * 5)
    (git_repo / "gone.txt").write_text("bye\n")
    commit_all(git_repo)

    def edit(r):
        (r / "a.py").write_text(BASE.replace("x + 3\n", "x * 3\n").replace("x + 27\n", "x - 27\n"))
        os.rename(r / "old_name.py", r / "new_name.py")
        (r / "new_name.py").write_text("VALUE = 1\nOTHER = 2\n" * 4 + "VALUE = 10\nOTHER = 2\n")
        (r / "gone.txt").unlink()
        (r / "pkg").mkdir()
        (r / "pkg" / "fresh.py").write_text("print('hi')\n")
    diff = make_diff(git_repo, edit)
    assert "rename from old_name.py" in diff and "deleted file mode" in diff
    res = run_tool("apply_patch", {"patch": diff}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "a.py").read_text() == BASE.replace("x + 3\n", "x * 3\n").replace("x + 27\n", "x - 27\n")
    assert not (git_repo / "old_name.py").exists()
    assert (git_repo / "new_name.py").read_text().endswith("VALUE = 10\nOTHER = 2\n")
    assert not (git_repo / "gone.txt").exists()
    assert (git_repo / "pkg" / "fresh.py").read_text() == "print('hi')\n"
    assert "renamed old_name.py -> new_name.py" in res.output
    assert sorted(res.details["files"]) == sorted(
        ["a.py", "old_name.py", "new_name.py", "gone.txt", "pkg/fresh.py"])


def test_pure_rename_without_hunks(git_repo):
    (git_repo / "x.txt").write_text("same\n")
    commit_all(git_repo)
    diff = make_diff(git_repo, lambda r: os.rename(r / "x.txt", r / "y.txt"))
    assert "similarity index 100%" in diff
    assert run_tool("apply_patch", {"patch": diff}, git_repo).ok
    assert (git_repo / "y.txt").read_bytes() == b"same\n" and not (git_repo / "x.txt").exists()


def test_crlf_file_keeps_crlf(git_repo):
    crlf = b"line one\r\nline two\r\nline three\r\n"
    (git_repo / "win.txt").write_bytes(crlf)
    commit_all(git_repo)
    diff = make_diff(git_repo, lambda r: (r / "win.txt").write_bytes(
        b"line one\r\nline 2\r\nadded\r\nline three\r\n"))
    assert run_tool("apply_patch", {"patch": diff}, git_repo).ok
    assert (git_repo / "win.txt").read_bytes() == b"line one\r\nline 2\r\nadded\r\nline three\r\n"


def test_lf_patch_applies_to_crlf_file(git_repo):
    """A model writes LF diffs; the CRLF file stays CRLF."""
    (git_repo / "win.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    commit_all(git_repo)
    patch = "--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    assert run_tool("apply_patch", {"patch": patch}, git_repo).ok
    assert (git_repo / "win.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


def test_no_trailing_newline_both_ways(git_repo):
    (git_repo / "n.txt").write_bytes(b"one\ntwo")
    (git_repo / "m.txt").write_bytes(b"one\ntwo\n")
    commit_all(git_repo)

    def edit(r):
        (r / "n.txt").write_bytes(b"one\ntwo\nthree\n")
        (r / "m.txt").write_bytes(b"one\nTWO")
    diff = make_diff(git_repo, edit)
    assert diff.count("\\ No newline at end of file") == 2
    assert run_tool("apply_patch", {"patch": diff}, git_repo).ok
    assert (git_repo / "n.txt").read_bytes() == b"one\ntwo\nthree\n"
    assert (git_repo / "m.txt").read_bytes() == b"one\nTWO"


def test_context_drifted_by_inserted_lines(git_repo):
    (git_repo / "a.py").write_text(BASE)
    commit_all(git_repo)
    diff = make_diff(git_repo, lambda r: (r / "a.py").write_text(BASE.replace("x + 20\n", "x + 200\n")))
    drifted = "import os\nimport sys\n\n\n" * 10 + BASE  # 40 lines pushed in above the hunk
    (git_repo / "a.py").write_text(drifted)
    res = run_tool("apply_patch", {"patch": diff}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "a.py").read_text() == drifted.replace("x + 20\n", "x + 200\n")


def test_whitespace_only_drift(git_repo):
    src = "class A:\n    def run(self):\n        a = 1\n        b = 2\n        return a + b\n"
    (git_repo / "w.py").write_text(src)
    commit_all(git_repo)
    diff = make_diff(git_repo, lambda r: (r / "w.py").write_text(src.replace("b = 2", "b = 3")))
    # the file drifted: trailing spaces added, and then the whole class re-indented by 4
    drifted = "".join("    " + line.rstrip("\n") + "  \n" for line in src.splitlines(True))
    (git_repo / "w.py").write_text(drifted)
    res = run_tool("apply_patch", {"patch": diff}, git_repo)
    assert res.ok, res.output
    out = (git_repo / "w.py").read_text()
    assert "            b = 3\n" in out and "b = 2" not in out
    assert "ignoring" in res.output  # the model is told the match was tolerant


def test_diff_u_between_real_files(tmp_path, plain_dir):
    old = tmp_path / "calc.py.orig"
    new = tmp_path / "calc.py"
    old.write_text(BASE)
    new.write_text(BASE.replace("x + 5\n", "x + 5  # five\n"))
    diff = subprocess.run(["diff", "-u", str(old), str(new)], capture_output=True, text=True).stdout
    assert diff.startswith("--- ")
    (plain_dir / "calc.py").write_text(BASE)
    res = run_tool("apply_patch", {"patch": diff.replace(str(tmp_path) + "/", "")}, plain_dir)
    assert res.ok, res.output
    assert (plain_dir / "calc.py").read_text() == new.read_text()
    # the same with `diff -u old/x new/x` style paths (stripped like patch -p1)
    diff2 = subprocess.run(["diff", "-u", "--label", "orig/calc.py", "--label", "new/calc.py",
                            str(new), str(old)], capture_output=True, text=True).stdout
    assert run_tool("apply_patch", {"patch": diff2}, plain_dir).ok
    assert (plain_dir / "calc.py").read_text() == BASE


def test_corrupt_diffs_leave_every_file_untouched(git_repo):
    (git_repo / "a.py").write_text(BASE)
    (git_repo / "b.py").write_text("x = 1\n")
    commit_all(git_repo)

    def edit(r):
        (r / "a.py").write_text(BASE.replace("x + 1\n", "x + 100\n"))
        (r / "b.py").write_text("x = 2\n")
    good = make_diff(git_repo, edit)
    before = snapshot(git_repo)
    truncated = good[: good.index("+x = 2")]  # cut inside b.py's hunk
    wrong_context = good.replace(" def f2(x):", " def f2(y):")  # second file fine, first broken
    bad_header = good.replace("@@ -1 +1 @@", "@@ -1,7 +1,9 @@")
    garbage = "this is not a diff\n@@ nope @@\n"
    for patch in (truncated, wrong_context, bad_header, garbage):
        res = run_tool("apply_patch", {"patch": patch}, git_repo)
        assert not res.ok and res.details["error"] == "patch_failed", patch
        assert snapshot(git_repo) == before
    assert CheckpointStore(git_repo).list() == []
    assert not (git_repo / ".clover").exists()


def test_failure_names_hunk_and_shows_closest_lines(git_repo):
    (git_repo / "a.py").write_text(BASE)
    commit_all(git_repo)
    patch = ("--- a/a.py\n+++ b/a.py\n@@ -10,3 +10,3 @@\n def f3(x):\n-    return x + 3\n"
             "+    return x * 3\n \n@@ -40,3 +40,3 @@\n def f13(x):\n-    return x - 13\n"
             "+    return x * 13\n \n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert not res.ok
    assert "Hunk 2 of 2 for a.py" in res.output
    assert "Closest lines in a.py" in res.output and "return x + 13" in res.output
    assert (git_repo / "a.py").read_text() == BASE  # hunk 1 was fine, but nothing was applied


def test_ambiguous_hunk_without_line_numbers_rejected(git_repo):
    """A bare `@@` header says nothing about where the hunk goes: a repeated context is refused."""
    text = "start\n" + "    pass\n    x = 1\n    pass\n" * 2 + "end\n"
    (git_repo / "d.py").write_text(text)
    commit_all(git_repo)
    patch = "--- a/d.py\n+++ b/d.py\n@@\n     pass\n-    x = 1\n+    x = 2\n     pass\n"
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert not res.ok and "ambiguous" in res.output and "matches 2 places" in res.output
    assert (git_repo / "d.py").read_text() == text


def test_repeated_context_goes_to_the_match_nearest_the_header(git_repo):
    """As `git apply` and GNU patch: the stated line picks among equal contexts."""
    text = "start\n" + "    pass\n    x = 1\n    pass\n" * 2 + "end\n"
    (git_repo / "d.py").write_text(text)
    commit_all(git_repo)
    patch = "--- a/d.py\n+++ b/d.py\n@@ -5,3 +5,3 @@\n     pass\n-    x = 1\n+    x = 2\n     pass\n"
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "d.py").read_text() == text.replace("x = 1\n    pass\nend", "x = 2\n    pass\nend")
    git(git_repo, "checkout", "d.py")
    first = patch.replace("@@ -5,3 +5,3 @@", "@@ -2,3 +2,3 @@")
    assert run_tool("apply_patch", {"patch": first}, git_repo).ok
    assert (git_repo / "d.py").read_text() == text.replace("x = 1", "x = 2", 1)


def test_mode_is_kept_and_new_file_mode_applied(git_repo):
    script = git_repo / "run.sh"
    script.write_text("#!/bin/sh\necho one\n")
    script.chmod(0o755)
    commit_all(git_repo)

    def edit(r):
        (r / "run.sh").write_text("#!/bin/sh\necho two\n")
        (r / "tool.sh").write_text("#!/bin/sh\n")
        (r / "tool.sh").chmod(0o755)
    diff = make_diff(git_repo, edit)
    assert "new file mode 100755" in diff
    assert run_tool("apply_patch", {"patch": diff}, git_repo).ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert script.read_text().endswith("echo two\n")
    assert os.access(git_repo / "tool.sh", os.X_OK)


def test_binary_file_patch_rejected(git_repo):
    (git_repo / "blob.bin").write_bytes(bytes(range(256)))
    commit_all(git_repo)
    diff = make_diff(git_repo, lambda r: (r / "blob.bin").write_bytes(bytes(range(255, -1, -1))))
    res = run_tool("apply_patch", {"patch": diff}, git_repo)
    assert not res.ok and "binary" in res.output.lower()
    assert (git_repo / "blob.bin").read_bytes() == bytes(range(256))


def test_patch_in_markdown_fence_and_create_on_existing(git_repo):
    (git_repo / "a.txt").write_text("1\n2\n3\n")
    commit_all(git_repo)
    fenced = "Here you go:\n```diff\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n```\n"
    assert run_tool("apply_patch", {"patch": fenced}, git_repo).ok
    assert (git_repo / "a.txt").read_text() == "1\ntwo\n3\n"
    create = "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new\n"
    res = run_tool("apply_patch", {"patch": create}, git_repo)
    assert not res.ok and "already exists" in res.output


def test_wrong_hunk_counts_from_a_model_are_repaired_not_truncated(git_repo):
    (git_repo / "a.txt").write_text("a\nb\nc\n\nd\n")
    (git_repo / "z.txt").write_text("q\n")
    commit_all(git_repo)
    # header undercounts (unidiff alone would silently drop "+C" and " c"); a blank context
    # line lost its space; the counts of the second file are fine
    patch = ("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n+C\n c\n\n d\n"
             "--- a/z.txt\n+++ b/z.txt\n@@ -1 +1 @@\n-q\n+r\n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "a.txt").read_text() == "a\nB\nC\nc\n\nd\n"
    assert (git_repo / "z.txt").read_text() == "r\n"
    cut = "--- a/z.txt\n+++ b/z.txt\n@@ -1,3 +1,3 @@\n-r\n"
    res = run_tool("apply_patch", {"patch": cut}, git_repo)
    assert not res.ok and "cut off" in res.output
    assert (git_repo / "z.txt").read_text() == "r\n"


def test_hunk_headers_without_line_numbers(git_repo):
    (git_repo / "a.py").write_text(BASE)
    commit_all(git_repo)
    patch = ("--- a/a.py\n+++ b/a.py\n@@\n def f7(x):\n-    return x + 7\n+    return x + 70\n"
             "@@ ... @@\n def f9(x):\n-    return x + 9\n+    return x + 90\n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "a.py").read_text() == BASE.replace("x + 7\n", "x + 70\n").replace("x + 9\n", "x + 90\n")


def test_real_git_diff_with_repeated_context_applies_where_git_would(git_repo):
    """Three identical blocks, the middle one and the last one changed: `git diff` gives hunks
    whose whole text occurs three times; each goes to the block its header names."""
    block = "a\nb\nc\nX = 1\nd\ne\nf\ng\nh\ni\nj\n"
    (git_repo / "r.txt").write_text(block * 3)
    commit_all(git_repo)

    def edit(r):
        (r / "r.txt").write_text(block + block.replace("X = 1", "X = 2") + block.replace("1", "3"))
    diff = make_diff(git_repo, edit)
    assert diff.count("@@ -") == 2
    res = run_tool("apply_patch", {"patch": diff}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "r.txt").read_text() == block + block.replace("X = 1", "X = 2") + \
        block.replace("1", "3")
