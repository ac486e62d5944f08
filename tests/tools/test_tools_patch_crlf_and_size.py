"""apply_patch on hostile-review input: CRLF patches, patches that empty or fill a file,
and a patch of 10,000 hunks, which must cost CPU time near-linear in its size."""
from __future__ import annotations

import signal
import time

import pytest

from clover_cli.tools.registry import run_tool

from .conftest import commit_all, git


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.mark.parametrize("git_header", ["", "diff --git a/a.py b/a.py\n"])
@pytest.mark.parametrize("file_eol", ["\n", "\r\n"])
def test_a_crlf_patch_applies_and_the_file_keeps_its_line_ends(git_repo, file_eol, git_header):
    (git_repo / "a.py").write_bytes(f"one{file_eol}two{file_eol}three{file_eol}".encode())
    commit_all(git_repo)
    patch = crlf(git_header + "--- a/a.py\n+++ b/a.py\n"
                 "@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n+2b\n three\n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    e = file_eol
    assert (git_repo / "a.py").read_bytes() == f"one{e}TWO{e}2b{e}three{e}".encode()


def test_a_crlf_patch_creates_and_deletes_files(git_repo):
    (git_repo / "old.txt").write_text("bye\n")
    commit_all(git_repo)
    patch = crlf("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
                 "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "new.py").read_bytes() == b"x = 1\ny = 2\n"
    assert not (git_repo / "old.txt").exists()


def test_a_crlf_patch_that_does_not_match_says_which_lines(git_repo):
    (git_repo / "a.py").write_text("one\ntwo\n")
    commit_all(git_repo)
    res = run_tool("apply_patch", {"patch": crlf("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n one\n-zwei\n+2\n")},
                   git_repo)
    assert not res.ok and "does not exist" not in res.output
    assert "not found in a.py" in res.output and "zwei" in res.output


@pytest.mark.parametrize("content", [b"one\ntwo\n", b"one\ntwo", b"one\r\ntwo\r\n"])
def test_a_patch_that_empties_a_file_keeps_it_empty(git_repo, content):
    (git_repo / "a.py").write_bytes(content)
    commit_all(git_repo)
    (git_repo / "a.py").write_bytes(b"")
    patch = git(git_repo, "diff")  # `@@ -1,2 +0,0 @@` with both names: emptied, not deleted
    git(git_repo, "checkout", "--", "a.py")
    assert "+0,0 @@" in patch and "/dev/null" not in patch
    res = run_tool("apply_patch", {"patch": patch}, git_repo)
    assert res.ok, res.output
    assert (git_repo / "a.py").read_bytes() == b"" and "modified a.py" in res.output
    assert git(git_repo, "diff").strip() == patch.strip()


def test_a_patch_that_fills_an_empty_file_modifies_it(git_repo):
    (git_repo / "empty.py").write_bytes(b"")
    commit_all(git_repo)
    res = run_tool("apply_patch", {"patch": "--- a/empty.py\n+++ b/empty.py\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
                   git_repo)
    assert res.ok, res.output
    assert (git_repo / "empty.py").read_bytes() == b"a\nb\n"


class _CPUBudget(Exception):
    pass


def _over_budget(*_):
    raise _CPUBudget


@pytest.mark.parametrize("hunks", [10_000])
def test_ten_thousand_hunks_cost_near_linear_cpu_time(plain_dir, hunks):
    """Each hunk used to scan the whole file (quadratic: about 200 s of CPU for this patch);
    now a hunk costs the occurrences of its rarest line. About 1 s of CPU here; the bound is CPU
    time (ITIMER_PROF stops a regression there), so a busy machine does not fail it."""
    lines = [f"line {i}\n" for i in range(hunks * 4)]
    (plain_dir / "big.py").write_text("".join(lines))
    parts = ["--- a/big.py\n+++ b/big.py\n"]
    for k in range(hunks):
        s = k * 4
        parts.append(f"@@ -{s + 1},3 +{s + 1},3 @@\n {lines[s]}-{lines[s + 1]}+new {k}\n {lines[s + 2]}")
    previous = signal.signal(signal.SIGPROF, _over_budget)
    signal.setitimer(signal.ITIMER_PROF, 15.0)
    t0 = time.process_time()
    try:
        res = run_tool("apply_patch", {"patch": "".join(parts)}, plain_dir)
    except _CPUBudget:
        pytest.fail("apply_patch used over 15 s of CPU time for 10,000 hunks")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    cpu = time.process_time() - t0
    assert res.ok, res.output[:500]
    assert cpu < 15
    new = (plain_dir / "big.py").read_text().splitlines()
    assert len(new) == len(lines) and new[1] == "new 0" and new[-3] == f"new {hunks - 1}"
