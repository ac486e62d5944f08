"""Hostile repositories: a tree 1,500 folders deep, pathological ignore files, a `.git/config`
that includes a FIFO. Each must end quickly with a listing or a one-line refusal (issue: hangs
and unbounded memory; docs/tools.md, "Bounds")."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clover_cli.tools.registry import run_tool

from .conftest import git

DEPTH = 1500


@pytest.fixture
def deep_root(tmp_path):
    """A repository folder removed afterwards by `rm -rf` (pytest's own clean-up uses
    shutil.rmtree, which recurses once per level and fails on this tree)."""
    root = tmp_path / "repo"
    root.mkdir()
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def _deep_tree(root: Path) -> str:
    """root/d/d/.../d/deep.py, DEPTH folders down; its repo-relative path."""
    here = root
    for _ in range(DEPTH):
        here = here / "d"
        os.mkdir(here)
    (here / "deep.py").write_text("def deep_function():\n    return 1\n")
    return "d/" * DEPTH + "deep.py"


@pytest.mark.timeout(120)
def test_a_1500_deep_tree_is_listed_mapped_and_commands_still_run(deep_root):
    root = deep_root
    (root / "top.py").write_text("def top_function():\n    return 2\n")
    deep = _deep_tree(root)
    listing = run_tool("list_files", {}, root)
    assert listing.ok, listing.output
    assert deep in listing.details["files"] and "top.py" in listing.details["files"]
    mapped = run_tool("repo_map", {}, root)
    assert mapped.ok, mapped.output
    assert "top_function" in mapped.output
    shell = run_tool("run_shell", {"command": "echo still-runs"}, root)
    assert shell.ok and "still-runs" in shell.output, shell.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize("section", ["include", 'includeIf "gitdir:/nowhere/"'])
def test_a_fifo_included_by_the_git_config_is_refused_not_waited_on(git_repo, section):
    os.mkfifo(git_repo / ".git" / "pipe")
    with open(git_repo / ".git" / "config", "a") as fh:
        fh.write(f"[{section}]\n\tpath = pipe\n")
    listing = run_tool("list_files", {}, git_repo)
    assert not listing.ok
    assert listing.output == ("list_files failed: the repository's git config names .git/pipe, which is a "
                              "FIFO, not a regular file; git is not run here")
    from clover_cli.tools.gitutil import current_branch

    assert current_branch(git_repo) is None  # the branch name in the status line: nothing, at once


@pytest.mark.timeout(60)
def test_every_git_call_has_a_timeout(git_repo, monkeypatch):
    from clover_cli.tools import gitutil

    os.mkfifo(git_repo / "pipe")  # `git hash-object pipe` opens it and waits for a writer
    monkeypatch.setattr(gitutil, "GIT_TIMEOUT", 1.0)
    with pytest.raises(gitutil.GitTimeout, match=r"^git hash-object did not finish within 1 s$"):
        gitutil.git_run(git_repo, "hash-object", "pipe")


def _pathological_ignores(root: Path) -> str:
    """60,000 two-star lines no path matches, and one long path; the long path's repo-relative name."""
    (root / ".gitignore").write_text("".join(f"*a*q{i}\n" for i in range(60_000)))
    folder = root / ("a" * 200)
    folder.mkdir()
    (folder / ("a" * 200 + ".py")).write_text("def long_named():\n    return 3\n")
    (root / "top.py").write_text("def top_function():\n    return 2\n")
    return f"{'a' * 200}/{'a' * 200}.py"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_pathological_ignore_lines_cost_a_bounded_amount_of_work(tmp_path):
    from clover_cli.tools import gitignore

    root = tmp_path / "plain"
    root.mkdir()
    long_path = _pathological_ignores(root)
    rules = gitignore.GitIgnores(root)
    rules.enter("")
    rules.enter("a" * 200 + "/")
    verdicts = [rules.ignored(rel, False) for rel in (long_path, long_path, long_path, "top.py")]
    assert verdicts == [False] * 4
    assert rules.exhausted  # the budget, not the minutes the regexes would take, ended it
    worst = gitignore.MAX_LINES * (len(long_path) + 1) ** 2
    assert rules.work <= gitignore.MAX_WORK + worst
    listing = run_tool("list_files", {}, root)
    assert listing.ok and long_path in listing.details["files"], listing.output  # repo_map lists alike


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [".gitignore", ".ignore", ".rgignore"])
def test_an_ignore_file_that_never_ends_keeps_ripgrep_out_and_the_pattern_unblamed(git_repo, name):
    (git_repo / "sub").mkdir()
    (git_repo / "sub" / "a.txt").write_text("hello world\n")
    os.symlink("/dev/zero", git_repo / "sub" / name)
    result = run_tool("grep", {"pattern": "hello"}, git_repo)
    assert result.ok, result.output
    assert result.output.startswith("sub/a.txt:1: hello world")
    assert result.details["engine"] == "python"


@pytest.mark.timeout(60)
def test_clover_run_in_a_repository_that_includes_a_fifo_ends(git_repo, tmp_path):
    import json

    from in_process import clover

    os.mkfifo(git_repo / ".git" / "pipe")
    with open(git_repo / ".git" / "config", "a") as fh:
        fh.write("[include]\n\tpath = pipe\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"completions": [
        '<tool_call>\n{"name": "list_files", "arguments": {}}\n</tool_call>', "Done."]}))
    p = clover("run", "list", "--model", f"replay:{script}", "--root", str(git_repo), "--json")
    assert p.returncode == 0, p.stderr
    results = [json.loads(line) for line in p.stdout.splitlines() if '"tool_result"' in line]
    assert results[0]["ok"] is False and "which is a FIFO, not a regular file" in results[0]["output"]
