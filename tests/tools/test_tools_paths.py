"""Path safety on every tool: `..`, absolute paths and symlinks that leave the root are refused
and nothing outside the root is ever written."""
from __future__ import annotations

import pytest

from clover_cli.tools.registry import planned_writes, run_tool

from .conftest import snapshot


@pytest.fixture
def sandbox(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "inside.txt").write_text("inside\n")
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "link_in").symlink_to(root / "inside.txt")
    return root, outside


ESCAPES = ["../outside/secret.txt", "{outside}/secret.txt", "link_out", "dir_out/secret.txt",
           "sub/../../outside/secret.txt"]


def _calls(path):
    return [
        ("read_file", {"path": path}),
        ("list_files", {"path": path}),
        ("grep", {"pattern": "secret", "path": path}),
        ("repo_map", {"paths": [path]}),
        ("write_file", {"path": path, "content": "pwned\n"}),
        ("edit_file", {"path": path, "old": "secret", "new": "pwned"}),
        ("apply_patch", {"patch": f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-secret\n+pwned\n"}),
        ("apply_patch", {"patch": f"--- /dev/null\n+++ b/{path}/../x.new\n@@ -0,0 +1 @@\n+pwned\n"}),
    ]


@pytest.mark.parametrize("template", ESCAPES)
def test_every_tool_refuses_escapes(sandbox, template):
    root, outside = sandbox
    path = template.format(outside=outside)
    before = snapshot(outside)
    for name, args in _calls(path):
        res = run_tool(name, args, root)
        assert not res.ok, (name, path, res.output)
        assert "outside the repository root" in res.output, (name, res.output)
        assert "secret\n" not in res.output or name == "apply_patch"
    assert snapshot(outside) == before
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlink_inside_root_is_followed_and_private_dirs_refused(sandbox):
    root, _ = sandbox
    assert run_tool("read_file", {"path": "link_in"}, root).output == "     1\tinside"
    assert run_tool("edit_file", {"path": "link_in", "old": "inside", "new": "changed"}, root).ok
    assert (root / "inside.txt").read_text() == "changed\n" and (root / "link_in").is_symlink()
    res = run_tool("write_file", {"path": ".clover/checkpoints/x", "content": ""}, root)
    assert not res.ok and ".clover/" in res.output
    res = run_tool("write_file", {"path": ".git/config", "content": ""}, root)
    assert not res.ok and ".git/" in res.output
    assert not (root / ".git").exists()


def test_absolute_path_inside_root_is_allowed(sandbox):
    root, _ = sandbox
    res = run_tool("read_file", {"path": str(root / "inside.txt")}, root)
    assert res.ok and res.details["path"] == "inside.txt"
    assert planned_writes("write_file", {"path": str(root / "n.txt"), "content": ""}, root) == ["n.txt"]


def test_state_paths_are_checked_before_use(tmp_path):
    """Paths read back from checkpoints or sessions: plain, relative, inside, no symlinked dir."""
    from clover_cli.tools.paths import PathError, check_state_path
    root = tmp_path / "repo"
    (root / "d").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    (root / "in").symlink_to(root / "d")
    assert check_state_path(root, "d/x.py") == "d/x.py"
    assert check_state_path(root, "in/x.py") == "in/x.py"  # a link that stays inside is fine
    for bad in ("../x", "/etc/passwd", "d/../../x", "./x", "d//x", "", ".git/config",
                ".clover/x", "out/secret", "n" * 300, 5, None, ["x"], "a\x00b"):
        with pytest.raises(PathError):
            check_state_path(root, bad)


def test_fsat_never_walks_through_a_symlinked_directory(tmp_path):
    from clover_cli.tools import fsat
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub").symlink_to(outside)
    with pytest.raises(fsat.UnsafePathError, match="symlink"):
        fsat.write_atomic(root, "sub/f.txt", b"x")
    with pytest.raises(fsat.UnsafePathError):
        fsat.probe(root, "sub/f.txt")
    with pytest.raises(fsat.UnsafePathError):
        fsat.remove(root, "sub/f.txt")
    assert list(outside.iterdir()) == []
    (root / "file").write_text("x")
    assert fsat.probe(root, "file/below").kind == "absent"  # a file on the way: cannot exist
    fsat.write_atomic(root, "a/b/c.txt", b"deep")
    assert (root / "a/b/c.txt").read_bytes() == b"deep"


@pytest.mark.parametrize("path", ["nested/.git/config", "nested/.git/hooks/pre-commit",
                                  "nested/.git", "deep/er/.git/config"])
def test_writes_into_any_git_internals_are_refused(tmp_path, path):
    """A nested repository's .git/config (core.fsmonitor) or a `gitdir:` file would make a later
    git command run code: the file tools refuse every .git, not only the root's."""
    root = tmp_path / "root"
    (root / "nested" / ".git").mkdir(parents=True)
    (root / "deep" / "er").mkdir(parents=True)
    res = run_tool("write_file", {"path": path, "content": "[core]\n\tfsmonitor = touch pwned\n"}, root)
    assert not res.ok and ".git" in res.output
    assert not (root / "nested" / ".git" / "config").exists()
    assert not (root / "deep" / "er" / ".git").exists()
