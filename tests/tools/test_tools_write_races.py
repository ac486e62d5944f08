"""Concurrency: two real processes editing one repository lose no acknowledged edit (the edit
lock) and never share a checkpoint id; a held lock makes a second writer wait or fail clearly;
a directory swapped for a symlink during writes never lets a write land outside the root."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from clover_cli.tools.checkpoints import CheckpointStore
from clover_cli.tools.registry import run_tool

EDITS = 30

WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from clover_cli.tools.registry import run_tool
    root, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    acked = 0
    for i in range(n):
        res = run_tool("edit_file", {"path": "log.txt", "old": "END\\n",
                                     "new": f"{tag}-{i}\\nEND\\n"}, root)
        if res.ok:
            acked += 1
            print(f"{tag}-{i}", flush=True)
        else:
            print("FAILED", res.output, file=sys.stderr, flush=True)
        res = run_tool("write_file", {"path": f"{tag}/f{i}.txt", "content": str(i)}, root)
        if res.ok:
            print(f"{tag}/f{i}.txt", flush=True)
""")


def _env(tmp_path: Path, **extra: str) -> dict:
    return {**os.environ, **extra}


@pytest.mark.slow
def test_two_processes_lose_no_acknowledged_edit(plain_dir, tmp_path):
    (plain_dir / "log.txt").write_text("START\nEND\n")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = [subprocess.Popen([sys.executable, str(script), str(plain_dir), tag, str(EDITS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(tmp_path))
             for tag in ("p", "q")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    acked = [line for out, _ in outs for line in out.split()]
    assert len(acked) == 4 * EDITS, [o[1][-500:] for o in outs]
    text = (plain_dir / "log.txt").read_text()
    for line in acked:
        if "/" in line:
            assert (plain_dir / line).is_file(), line
        else:
            assert f"\n{line}\n" in text, line
    store = CheckpointStore(plain_dir)
    ids = store._ids()
    assert len(ids) == 4 * EDITS == len(set(ids))  # one checkpoint per edit, none shared
    for _ in range(4 * EDITS):
        res = store.undo()
        assert res.ok, res.output
    assert (plain_dir / "log.txt").read_text() == "START\nEND\n"
    assert sorted(p.name for p in plain_dir.iterdir()) == ["log.txt"]


HOLDER = textwrap.dedent("""
    import sys, time
    from clover_cli.tools.lock import repo_lock
    with repo_lock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _hold(tmp_path, root, seconds):
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_refuses_clearly_after_the_timeout(plain_dir, tmp_path, monkeypatch):
    (plain_dir / "f.txt").write_text("one\n")
    holder = _hold(tmp_path, plain_dir, 600)  # held until killed below, however slow the machine
    try:
        monkeypatch.setenv("CLOVER_LOCK_TIMEOUT", "0.5")
        res = run_tool("write_file", {"path": "f.txt", "content": "two\n"}, plain_dir)
        assert not res.ok and res.details["error"] == "locked"
        assert f"pid {holder.pid}" in res.output and "nothing was changed" in res.output
        assert (plain_dir / "f.txt").read_text() == "one\n"
        assert CheckpointStore(plain_dir).undo().details["error"] == "locked"
    finally:
        holder.kill()
        holder.wait()
    assert run_tool("write_file", {"path": "f.txt", "content": "two\n"}, plain_dir).ok  # released


def _waiting_on_the_lock() -> bool:
    """Whether this process has the edit lock file open (a writer in repo_lock's wait)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").endswith("/edit.lock"):
                return True
        except OSError:
            pass
    return False


def test_a_second_writer_waits_and_says_so(plain_dir, tmp_path):
    holder = _hold(tmp_path, plain_dir, 600)

    def release():  # a second after the writer began waiting: its wait is >= 1 s by construction
        while not _waiting_on_the_lock() and holder.poll() is None:
            time.sleep(0.01)
        time.sleep(1.0)
        holder.kill()

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    try:
        res = run_tool("write_file", {"path": "g.txt", "content": "x\n"}, plain_dir)
    finally:
        holder.kill()
        holder.wait(timeout=30)
        releaser.join(30)
    assert res.ok and res.output.startswith("(Waited") and "another Clover process" in res.output
    assert (plain_dir / "g.txt").read_text() == "x\n"


@pytest.mark.slow
def test_directory_swapped_for_a_symlink_never_leaks_a_write(tmp_path):
    """A thread flips `sub` between a real directory and a symlink to a folder outside the root
    while 300 writes into `sub/` run: no byte lands outside."""
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            try:
                os.rename(root / "sub", root / "sub.real")
                os.symlink(outside, root / "sub")
                time.sleep(0.0005)
                os.unlink(root / "sub")
                os.rename(root / "sub.real", root / "sub")
            except OSError:
                pass
            time.sleep(0.0005)

    flipper = threading.Thread(target=flip)
    flipper.start()
    results = []
    try:
        for i in range(300):
            results.append(run_tool("write_file", {"path": f"sub/f{i}.txt", "content": f"{i}\n"},
                                    root))
    finally:
        stop.set()
        flipper.join()
    assert list(outside.iterdir()) == []
    assert all(r.ok or r.details.get("error") in ("write", "edit_failed", "checkpoint", "path", "os")
               for r in results), [(r.details, r.output) for r in results if not r.ok and r.details.get("error") not in ("write", "edit_failed", "checkpoint", "path", "os")][:3]
    assert any(r.ok for r in results)
