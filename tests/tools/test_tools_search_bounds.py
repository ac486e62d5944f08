"""grep, list_files and read_file under hostile input: bounded time, consistent decoding, honest
answers (docs/tools.md, "grep" and "Argument limits"). Each case runs on both grep engines where
ripgrep is installed; the Python engine is forced by hiding `rg` from shutil.which."""
from __future__ import annotations

import shutil

import pytest

from clover_cli.tools.read_file import read_file
from clover_cli.tools.registry import run_tool

from .conftest import commit_all

ENGINES = (["ripgrep"] if shutil.which("rg") else []) + ["python"]


@pytest.fixture
def engine(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr("clover_cli.tools.grep.shutil.which", lambda _: None)
    return request.param


@pytest.mark.timeout(120)  # a hang guard: the four searches take ~2 s of CPU; the answers show the deadline
@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_catastrophic_regexes_end_at_the_deadline_with_what_was_found(plain_dir, engine, monkeypatch):
    import clover_cli.tools.grepsearch as grepsearch

    monkeypatch.setattr(grepsearch, "GREP_SECONDS", 0.5)  # the deadline, shortened for the test
    (plain_dir / "early.txt").write_text("aab\n")  # searched first, matched at once
    (plain_dir / "long.txt").write_text("a" * 5000 + "\n" + "é" * 5000 + "\n")
    for pattern in ("(a|aa)+b", "(a*)*b", "(é|éé)+b", "^(a+)+$x"):
        res = run_tool("grep", {"pattern": pattern}, plain_dir)
        early = 1 if pattern in ("(a|aa)+b", "(a*)*b") else 0
        if res.ok:  # ripgrep does not backtrack, and the regex module avoids some backtracking
            assert res.details["matches"] == early
            assert engine == "ripgrep" or pattern not in ("(a|aa)+b", "(é|éé)+b")
        else:
            assert res.details["error"] == "timeout" and res.details["matches"] == early
            assert res.output.startswith(f"grep stopped: searching for {pattern!r} took longer than 0.5 s")
            assert ("(1 match in 1 file before it stopped)" in res.output) == bool(early)
            assert "\n" not in res.output


@pytest.mark.timeout(60)  # a hang guard only
def test_a_search_that_gets_no_cpu_is_still_stopped_at_the_deadline(plain_dir, monkeypatch):
    """The regex module's own timeout counts CPU time, so it never fires in a worker that gets no
    CPU (here: a stopped one); the caller keeps the deadline by the wall clock, kills that worker,
    and the next search starts a new one."""
    import os
    import signal

    import clover_cli.tools.grepsearch as grepsearch
    from clover_cli.tools import grepworker

    monkeypatch.setattr("clover_cli.tools.grep.shutil.which", lambda _: None)  # the Python engine
    monkeypatch.setattr(grepsearch, "GREP_SECONDS", 0.5)
    (plain_dir / "notes.txt").write_text("a needle here\n")
    assert run_tool("grep", {"pattern": "needle"}, plain_dir).details["matches"] == 1
    worker = grepworker._worker
    os.kill(worker.proc.pid, signal.SIGSTOP)
    res = run_tool("grep", {"pattern": "needle"}, plain_dir)
    assert not res.ok and res.details["error"] == "timeout" and "longer than 0.5 s" in res.output
    assert worker.proc.returncode == -signal.SIGKILL  # killed (and reaped), not left stopped
    again = run_tool("grep", {"pattern": "needle"}, plain_dir)
    assert again.ok and again.details["matches"] == 1 and grepworker._worker is not worker


@pytest.mark.timeout(60)  # a hang guard: exponential matching would not end; linear takes well under 1 s
def test_many_star_globs_match_in_linear_time(git_repo):
    from clover_cli.tools.globmatch import glob_match

    (git_repo / ("a" * 250)).write_text("x\n")
    (git_repo / ("a" * 100 + "b")).write_text("x\n")
    commit_all(git_repo)
    glob = "*a" * 200 + "*b"
    assert not glob_match("a" * 250, glob) and not glob_match("a/" * 2000, "**/" * 300 + "b")
    res = run_tool("list_files", {"pattern": glob}, git_repo)
    assert res.ok and res.details["files"] == []
    res = run_tool("list_files", {"pattern": "*a" * 50 + "*b"}, git_repo)
    assert res.details["files"] == ["a" * 100 + "b"]
    assert run_tool("grep", {"pattern": "x", "glob": glob}, git_repo).output.startswith("No matches")


GLOB_LANGUAGE = [  # (name, glob, matches or "error"): the language of docs/tools.md, "Globs"
    ("src/x/a.py", "src/**/*.{py,pyi}", True), ("a.py", "**/a.py", True), ("d/e/a.py", "**/a.py", True),
    ("]a.py", "[]]a.py", True), ("b.py", "[!a].py", True), ("a.py", "[!a].py", False),
    ("src/a.py", "*.txt", False), ("src/a.py", "*.py", True), ("src/a.py", "src/*.py", True),
    ("src/x/a.py", "src/*.py", False), ("a/b", "a/**", True), ("a", "a/**", False), ("ab", "a?", True),
    ("a/", "a?", False), ("a/b/c", "a/**/c", True), ("a/c", "a/**/c", True), ("a.py", "{a,b}.py", True),
    ("c.py", "{a,b}.py", False), ("x[.py", "x[.py", True), ("a{b", "a{b", True),
    ("z.py", "[z-a].py", "error"), ("a.py", "./a.py", True), ("a.py", "/a.py", True),
]


@pytest.mark.parametrize("name,glob,want", GLOB_LANGUAGE)
def test_glob_matcher_reads_the_glob_language(name, glob, want):
    """Brackets, braces, `**/`, anchoring and unreadable classes, as the regex matcher it replaced
    read them (these cases were checked against it before it was removed)."""
    from clover_cli.tools.files import GlobError
    from clover_cli.tools.globmatch import glob_match

    try:
        got = glob_match(name, glob)
    except GlobError:
        got = "error"
    assert got == want


def test_a_megabyte_path_is_refused_at_once(plain_dir):
    for path in ("a/" * 500_000, "x" * 1_000_000, "d/" + "é" * 200):  # refused by length, unwalked
        for res in (read_file(plain_dir, path), run_tool("read_file", {"path": path}, plain_dir),
                    run_tool("list_files", {"path": path}, plain_dir),
                    run_tool("grep", {"pattern": "x", "path": path}, plain_dir)):
            assert not res.ok and res.details["error"] in ("path", "bad_arguments"), res.output
            assert "bytes" in res.output and len(res.output) < 300


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_files_over_five_megabytes_are_searched_and_unsearchable_ones_named(plain_dir, engine):
    with open(plain_dir / "big.log", "w") as fh:
        for i in range(120_000):
            fh.write(f"line {i} of padding text, nothing to see here\n")
        fh.write("the NEEDLE is at the end\n")
    assert (plain_dir / "big.log").stat().st_size > 5_000_000
    res = run_tool("grep", {"pattern": "NEEDLE"}, plain_dir)
    assert res.ok and res.output.splitlines()[0] == "big.log:120001: the NEEDLE is at the end"
    if engine == "python":  # a file too big even to stream is named, not skipped in silence
        with open(plain_dir / "huge.bin", "wb") as fh:
            fh.truncate(1_100_000_000)  # sparse: no disk used
        res = run_tool("grep", {"pattern": "NOWHERE"}, plain_dir)
        assert res.ok and res.details["skipped"] == ["huge.bin"]
        assert res.output == "No matches for 'NOWHERE'.\n[not searched: huge.bin (1,100,000,000 bytes)]"


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_grep_decodes_files_the_way_read_file_shows_them(git_repo, engine):
    (git_repo / "menu.txt").write_bytes(b"caf\xe9 au lait\nth\xe9\n")  # latin-1
    (git_repo / "utf8.txt").write_text("café crème\n")
    commit_all(git_repo)
    assert read_file(git_repo, "menu.txt").output.splitlines()[0] == "     1\tcafé au lait"
    res = run_tool("grep", {"pattern": "café"}, git_repo)
    assert res.output.splitlines()[:2] == ["menu.txt:1: café au lait", "utf8.txt:1: café crème"]
    res = run_tool("grep", {"pattern": "caf"}, git_repo)  # an ASCII pattern: ripgrep's own answer
    assert res.output.splitlines()[:2] == ["menu.txt:1: café au lait", "utf8.txt:1: café crème"]
    assert run_tool("grep", {"pattern": r"th\xe9"}, git_repo).output.splitlines()[0] == "menu.txt:2: thé"


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_file_names_with_newlines_cannot_fake_entries(git_repo, engine):
    (git_repo / "evil\nfake.py").write_text("secret = 1\n")
    (git_repo / "real.py").write_text("secret = 2\n")
    commit_all(git_repo)
    res = run_tool("list_files", {}, git_repo)
    assert res.output.splitlines() == ["README.md", "'evil\\nfake.py'", "real.py"]
    assert "evil\nfake.py" in res.details["files"]
    res = run_tool("grep", {"pattern": "secret"}, git_repo)
    assert res.output.splitlines()[:2] == ["'evil\\nfake.py':1: secret = 1", "real.py:1: secret = 2"]
    assert res.details["engine"] == engine


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed here")
def test_a_pattern_ripgrep_hands_over_reads_ripgrep_s_files(git_repo):
    """A non-ASCII pattern goes to the Python engine, which still reads only the files ripgrep
    would (hidden ones are not among them), so `café` and `caf` search the same files."""
    (git_repo / ".hidden").mkdir()
    (git_repo / ".hidden" / "menu.txt").write_text("café\n")
    (git_repo / "menu.txt").write_text("café\n")
    commit_all(git_repo)
    for pattern, engine in (("caf", "ripgrep"), ("café", "python")):
        res = run_tool("grep", {"pattern": pattern}, git_repo)
        assert res.details["engine"] == engine and res.output.splitlines()[0] == "menu.txt:1: café"
        assert res.details["files"] == 1
