"""Outside git, the walk honours .gitignore as git would (tools/gitignore.py): `!` negation,
nested .gitignore files, anchored and folder-only lines; and a hostile file costs no time.
Where git is installed, the answer is compared with `git ls-files` on the same tree."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from clover_cli.tools.files import repo_files


def tree(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


FILES = {
    ".gitignore": "*.log\n!keep.log\n/top.txt\nout/\nsub/gen/*\n!sub/gen/wanted.py\n",
    "a.log": "", "keep.log": "", "top.txt": "", "app.py": "",
    "d/top.txt": "", "d/b.log": "", "d/keep.log": "",
    "out/x.py": "", "d/out/y.py": "",
    "sub/.gitignore": "*.tmp\n!important.log\n/local.py\n",
    "sub/a.tmp": "", "sub/important.log": "", "sub/other.log": "", "sub/local.py": "",
    "sub/deep/local.py": "", "sub/deep/b.tmp": "",
    "sub/gen/junk.py": "", "sub/gen/wanted.py": "",
    "other/a.tmp": "",
}
EXPECTED = [".gitignore", "app.py", "d/keep.log", "d/top.txt", "keep.log", "other/a.tmp",
            "sub/.gitignore", "sub/deep/local.py", "sub/gen/wanted.py", "sub/important.log"]


def test_negation_nesting_anchoring_and_folders(plain_dir):
    tree(plain_dir, FILES)
    assert repo_files(plain_dir) == EXPECTED
    assert repo_files(plain_dir, plain_dir / "sub") == [p for p in EXPECTED if p.startswith("sub/")]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_the_walk_agrees_with_git(tmp_path):
    root = tmp_path / "g"
    root.mkdir()
    tree(root, FILES)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=root, check=True,
                            env=env, capture_output=True, text=True).stdout.split()
    assert sorted(listed) == EXPECTED


@pytest.mark.timeout(30)  # the hang guard: a backtracking match costs seconds per name, 50 names
def test_a_hostile_gitignore_costs_no_time(plain_dir):
    """Lines with many stars (seconds per name in a backtracking regex) are skipped; a FIFO named
    .gitignore is not waited on; a bad line does not void the others."""
    tree(plain_dir, {".gitignore": "*a" * 12 + "*b\n[z-a]\nsecret.txt\n"})
    for i in range(50):
        (plain_dir / ("a" * 200 + str(i))).write_text("")
    (plain_dir / "secret.txt").write_text("")
    (plain_dir / "sub").mkdir()
    os.mkfifo(plain_dir / "sub" / ".gitignore")
    (plain_dir / "sub" / "x.py").write_text("")
    files = repo_files(plain_dir)
    assert "secret.txt" not in files and "sub/x.py" in files and len([f for f in files if f.startswith("aaa")]) == 50
