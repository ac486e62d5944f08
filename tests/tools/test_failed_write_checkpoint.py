"""A write that fails before changing anything leaves no checkpoint and gives no advice to run
`clover undo` (docs/tools.md, checkpoints): the repository read-only for an unprivileged user
(permission bits), and a read-only mount for root (mode bits do not stop root; a mount does, and
there even removing an absent file fails, which is what once made the rollback "fail").

Each case runs in a forked child (so setuid and the mount namespace stay there) and reports back
through a pipe."""
import ctypes
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

NOBODY = 65534
CLONE_NEWNS = 0x00020000


WRITE = ("write_file", {"path": "hello.py", "content": "print('hi')\n"})


def _in_child(setup, tool=WRITE) -> dict:
    """Runs setup() and then the tool call (write_file hello.py) + undo in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            repo = setup()
            result = run_tool(*tool, repo)
            store = CheckpointStore(repo)
            out = {"ok": result.ok, "output": result.output, "checkpoints": len(store.list()),
                   "undo": store.undo().output, "exists": (repo / "hello.py").exists(),
                   "a": (repo / "a.py").read_text() if (repo / "a.py").exists() else None}
        except BaseException as exc:  # reported to the parent, never a second pytest run
            out = {"skip": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def base():
    """A folder every user can enter (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="clover-rowrite-"))
    path.chmod(0o777)
    warm = path / "warm"  # import every lazily imported module while the interpreter is readable
    warm.mkdir()
    run_tool("write_file", {"path": "a.py", "content": "x\n"}, warm)
    CheckpointStore(warm).undo()
    yield path
    subprocess.run(["chmod", "-R", "u+w", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)


def _check(out: dict) -> None:
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["ok"] is False and not out["exists"]
    assert "nothing was changed" in out["output"] and "cannot write hello.py" in out["output"]
    assert "undo" not in out["output"] and ".clover-" not in out["output"]
    assert out["checkpoints"] == 0 and out["undo"].startswith("Nothing to undo")


def test_read_only_repository_as_an_unprivileged_user(base):
    repo, state = base / "repo", base / "state"
    repo.mkdir()
    state.mkdir()

    def setup() -> Path:
        _as_nobody(repo, state)
        repo.chmod(0o555)
        return repo

    _check(_in_child(setup))


def _as_nobody(repo: Path, state: Path) -> None:
    if os.geteuid() == 0:
        for p in (repo, state, *repo.iterdir()):
            os.chown(p, NOBODY, NOBODY)
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    os.environ["XDG_STATE_HOME"] = str(state)


def test_a_write_that_fails_halfway_puts_back_only_what_it_changed(base):
    repo, state = base / "repo", base / "state"
    (repo / "locked").mkdir(parents=True)
    (repo / "a.py").write_text("A = 1\n")
    state.mkdir()
    patch = ("--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n"
             "--- /dev/null\n+++ b/locked/new.py\n@@ -0,0 +1 @@\n+B = 1\n")

    def setup() -> Path:
        _as_nobody(repo, state)
        (repo / "locked").chmod(0o555)
        return repo

    out = _in_child(setup, ("apply_patch", {"patch": patch}))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["ok"] is False and out["a"] == "A = 1\n"
    assert "every file was restored (a.py): cannot write locked/new.py" in out["output"], out["output"]
    assert "undo" not in out["output"] and out["checkpoints"] == 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount")
def test_read_only_mount_as_root(base):
    repo = base / "repo"
    repo.mkdir()

    def setup() -> Path:
        if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "cannot create a mount namespace")
        for argv in (["mount", "--make-rprivate", "/"], ["mount", "--bind", str(repo), str(repo)],
                     ["mount", "-o", "remount,bind,ro", str(repo)]):
            subprocess.run(argv, check=True, capture_output=True)
        os.environ["XDG_STATE_HOME"] = str(base / "state")
        return repo

    _check(_in_child(setup))
