"""Git helpers against real repositories: branch, status, and the working-tree diff."""
from __future__ import annotations

from clover_cli.tools.gitutil import current_branch, diff_against, is_git_repo, status

from .conftest import git


def test_branch_status_and_diff(git_repo, plain_dir):
    assert is_git_repo(git_repo) and not is_git_repo(plain_dir)
    assert current_branch(git_repo) == "main" and current_branch(plain_dir) is None
    assert diff_against(plain_dir) == "" and status(plain_dir) == []
    (git_repo / "README.md").write_text("# demo\nmore\n")
    (git_repo / "new.py").write_text("x = 1\n")
    (git_repo / ".clover").mkdir()
    (git_repo / ".clover" / "junk").write_text("not for git\n")
    index_before = (git_repo / ".git" / "index").read_bytes()
    diff = diff_against(git_repo)
    assert "+more" in diff and "new file mode" in diff and "+x = 1" in diff
    assert ".clover" not in diff
    assert (git_repo / ".git" / "index").read_bytes() == index_before
    entries = {e["path"]: e for e in status(git_repo)}
    assert entries["README.md"]["worktree"] == "M" and entries["new.py"]["index"] == "?"
    assert not any(p.startswith(".clover") for p in entries)
    git(git_repo, "checkout", "-q", "--detach")
    assert current_branch(git_repo) is None


def test_diff_against_base_and_empty_repo(git_repo, tmp_path):
    first = git(git_repo, "rev-parse", "HEAD").strip()
    (git_repo / "a.txt").write_text("a\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-q", "-m", "a")
    (git_repo / "a.txt").write_text("b\n")
    assert "-a\n+b" in diff_against(git_repo)
    assert "+b" in diff_against(git_repo, base=first) and "-a" not in diff_against(git_repo, base=first)
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "f.txt").write_text("hello\n")
    assert "+hello" in diff_against(empty)
