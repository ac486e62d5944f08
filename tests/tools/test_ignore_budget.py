"""Pathological ignore files are bounded by counted work, never by a clock (tools/gitignore.py):
git is not handed ignore files past a budget of lines (its own matching has no bound), the
untracked files are then listed by the bounded walk, and reading rules counts against that
walk's budget too, so many large `.gitignore` files cannot add up. Real git; its GIT_TRACE shows
what it was asked."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clover_cli.tools import gitignore
from clover_cli.tools.gitignore import GitIgnores, heavy_ignores
from clover_cli.tools.list_files import list_files
from clover_cli.tools.repomap import repo_map

LONG = "/".join(["a" * 200] * 4)


def _repo(root: Path, ignore: str) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text(ignore)
    (root / LONG).mkdir(parents=True)
    (root / LONG / "deep.py").write_text("def deep():\n    return 1\n")
    (root / "keep.py").write_text("def keep():\n    return 2\n")
    (root / "junk.log").write_text("x\n")
    return root


def _git_asked(trace: Path) -> list[str]:
    return [line for line in trace.read_text(errors="replace").splitlines() if "ls-files" in line]


@pytest.fixture
def trace(tmp_path, monkeypatch):
    path = tmp_path / "git-trace.txt"
    path.write_text("")
    monkeypatch.setenv("GIT_TRACE", str(path))
    monkeypatch.setattr(gitignore, "_heavy_seen", {})
    return path


@pytest.mark.slow
def test_sixty_thousand_starred_lines_are_never_handed_to_git(tmp_path, trace):
    lines = "".join(f"*a*q{n}\n" for n in range(60_000)) + "*.log\n"
    root = _repo(tmp_path / "repo", lines)
    assert "over 5,000 patterns" in heavy_ignores(root)
    result = list_files(root)
    assert result.ok
    files = result.details["files"]
    assert "keep.py" in files and f"{LONG}/deep.py" in files
    assert "ignore rules applied by a bounded matcher" in result.output
    mapped = repo_map(root)
    assert mapped.ok and "keep" in mapped.output
    asked = _git_asked(trace)
    assert asked and not any("--exclude-standard" in line for line in asked), asked


def test_a_few_rules_still_go_to_git(tmp_path, trace):
    root = _repo(tmp_path / "repo", "*.log\n")
    assert heavy_ignores(root) is None
    result = list_files(root)
    assert "junk.log" not in result.details["files"] and "keep.py" in result.details["files"]
    assert "bounded matcher" not in result.output
    assert any("--exclude-standard" in line for line in _git_asked(trace))


@pytest.mark.slow
def test_reading_many_large_ignore_files_is_counted_work(tmp_path):
    root = tmp_path / "tree"
    big = "".join(f"*a*q{n}\n" for n in range(gitignore.MAX_LINES))
    for i in range(40):  # 400,000 lines in all: reading them all would take about 45 s
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / ".gitignore").write_text(big)
    rules = GitIgnores(root)
    read = 0
    for i in range(40):
        rules.enter(f"d{i}/")
        read += bool(rules._chains[f"d{i}/"])
        rules.ignored(f"d{i}/" + "a" * 200, False)
    assert rules.exhausted and rules.work <= gitignore.MAX_WORK
    assert read <= gitignore.MAX_WORK // (gitignore.COMPILE_NS * gitignore.MAX_LINES) + 1, read
    assert not rules.ignored("d39/x.log", False)  # past the budget: listed, never hidden


def test_a_nested_or_special_ignore_file_counts_too(tmp_path, trace):
    root = _repo(tmp_path / "repo", "*.log\nbuild/\n")
    (root / "build").mkdir()
    (root / "build" / ".gitignore").write_text("".join(f"*b*q{n}\n" for n in range(10_000)))
    assert heavy_ignores(root) is None  # inside an ignored folder: git never reads it
    (root / "sub").mkdir()
    (root / "sub" / ".gitignore").write_text("".join(f"*a*q{n}\n" for n in range(100)))
    gitignore._heavy_seen.clear()
    assert "sub/.gitignore" in heavy_ignores(root)
    (root / "sub" / ".gitignore").unlink()
    (root / "sub" / ".gitignore").symlink_to("/dev/zero")
    gitignore._heavy_seen.clear()
    assert "not a regular file" in heavy_ignores(root)
    assert "keep.py" in list_files(root).details["files"]
