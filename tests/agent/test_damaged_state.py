"""Damaged state ends in one clear line or a warning, never a traceback or a hang, and what was
there is kept: a session that is a folder or a FIFO, a record without its fields, a
state folder that is a file, a full disk while the session is appended, `replay:/dev/zero`."""
from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from in_process import clover

from clover_cli.agent.history import PromptHistory
from clover_cli.agent.session import SessionLog, sessions_dir
from clover_cli.tools.statedir import state_home

from .helpers import make_repo, replay


class _Hung(Exception):
    pass


def _hung(*_):
    raise _Hung


def _run(tmp_path, repo, *extra, answers=("Done.",), timeout=120):
    """`clover run` in process, failed if it has not returned after `timeout` s (a hang: the
    alarm interrupts a blocking open of a FIFO)."""
    spec = replay(tmp_path, list(answers), f"script-{time.monotonic_ns()}.json")
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        p = clover("run", "task", "--model", spec, "--root", str(repo), *extra)
    except _Hung:
        pytest.fail(f"clover run {' '.join(extra)} hung for {timeout} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert "_Hung" not in p.stderr, f"clover run {' '.join(extra)} hung for {timeout} s"
    assert "Traceback" not in p.stderr, p.stderr
    return p


def _first_session(tmp_path, repo) -> Path:
    p = _run(tmp_path, repo, answers=("First answer.",))
    assert p.returncode == 0, p.stderr
    (path,) = sessions_dir(repo).glob("*.jsonl")
    return path


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_session_name_that_is_a_folder_or_fifo_is_no_session(tmp_path, kind):
    repo = make_repo(tmp_path / "repo", git=False)
    real = _first_session(tmp_path, repo)
    before = real.read_bytes()
    odd = sessions_dir(repo) / "99999999-999999-zzzzzz.jsonl"  # sorts and dates after the real one
    os.mkdir(odd) if kind == "directory" else os.mkfifo(odd)
    p = _run(tmp_path, repo, "--session", odd.stem)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"clover run: error: session {odd.stem!r} cannot be read: {odd} is "
        f"{'a directory' if kind == 'directory' else 'a FIFO (named pipe)'}, not a session file"]
    # --continue takes the newest *session file*: the real one, resumed with its conversation
    p = _run(tmp_path, repo, "--continue", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.splitlines()[-1])["session_id"] == real.stem
    assert real.read_bytes().startswith(before)
    assert b"First answer." in real.read_bytes()
    assert (odd.is_dir() if kind == "directory" else odd.is_fifo())


def test_a_record_without_its_fields_is_skipped_with_one_line(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    path = _first_session(tmp_path, repo)
    with open(path, "a") as f:
        f.write('{"type": "original"}\n{"type": "original", "path": "calc.py", "content": 5}\n'
                '{"type": "message"}\n')
    p = _run(tmp_path, repo, "--continue")
    assert p.returncode == 0
    assert f"clover: session {path.stem}: skipped 3 unreadable lines" in p.stderr


@pytest.mark.parametrize("level", ["clover", "repos"])
def test_a_state_folder_that_is_a_file_is_one_error_line(tmp_path, level):
    repo = make_repo(tmp_path / "repo", git=False)
    blocker = state_home() if level == "clover" else state_home() / "repos"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("precious\n")
    p = _run(tmp_path, repo)
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("clover run: error: cannot keep sessions in ")
    assert f"{blocker} is a file, not a folder" in line
    assert blocker.read_text() == "precious\n"


@contextlib.contextmanager
def _memory_cap(extra: int):
    """Address space limited to what the process has now plus `extra` bytes, for the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    now = int(next(x for x in Path("/proc/self/status").read_text().splitlines()
                   if x.startswith("VmSize:")).split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (now + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_replay_of_dev_zero_or_a_folder_is_refused_at_once(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    for target, what in (("/dev/zero", "a character device"), (str(tmp_path), "a directory")):
        with _memory_cap(512 * 2**20):  # a regression reads /dev/zero until MemoryError, not forever
            p = clover("run", "task", "--model", f"replay:{target}", "--root", str(repo))
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert p.stderr.strip() == (f"clover run: error: replay file {target!r} cannot be used: "
                                    f"{target} is {what}, not a regular file")  # refused by its type, unread


def test_a_session_append_on_a_full_disk_warns_once_and_keeps_the_file(tmp_path, monkeypatch):
    """A full disk simulated at the write: the first write succeeds partly, then ENOSPC. The file
    keeps its last whole record, one warning is given, and later records are not attempted."""
    warnings: list[str] = []
    log = SessionLog(tmp_path, "s1", warn=warnings.append)
    log.append({"type": "meta", "note": "kept"})
    before = log.path.read_bytes()
    real_write = os.write

    def full_disk(fd, data):
        if os.fstat(fd).st_ino == os.stat(log.path).st_ino:
            if len(data) > 4:
                return real_write(fd, data[:4])  # a partial write, as a nearly full disk gives
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    log.append({"type": "message", "message": {"role": "user", "content": "x" * 100}})
    log.append({"type": "turn_end"})
    monkeypatch.setattr(os, "write", real_write)
    assert log.path.read_bytes() == before
    assert len(warnings) == 1 and "No space left on device" in warnings[0]
    assert warnings[0].startswith("clover: warning: session s1 is not saved from here on")


def _mount_tiny_tmpfs(where: Path) -> bool:
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                         capture_output=True)
    return res.returncode == 0


def test_clover_run_on_a_really_full_disk_keeps_the_session(tmp_path, monkeypatch):
    """The same on a real 64 KiB tmpfs (as root): the run ends normally with one warning."""
    mnt = tmp_path / "state"
    if os.geteuid() != 0 or not _mount_tiny_tmpfs(mnt):
        pytest.skip("needs root to mount a tmpfs")
    try:
        monkeypatch.setenv("XDG_STATE_HOME", str(mnt))
        repo = make_repo(tmp_path / "repo", git=False)
        path = _first_session(tmp_path, repo)
        before = path.read_bytes()
        with open(mnt / "filler", "wb", buffering=0) as f:  # fill the disk
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        p = _run(tmp_path, repo, "--continue", answers=("y" * 20000,))
        assert p.returncode == 0
        warnings = [x for x in p.stderr.splitlines() if x.startswith("clover: warning:")]
        assert len(warnings) == 1 and "No space left on device" in warnings[0]
        after = path.read_bytes()  # what fitted is kept, whole lines only; the big answer is not
        assert after.startswith(before) and after.endswith(b"\n") and b"yyyy" not in after
        assert all(json.loads(line) for line in after.splitlines())
        (mnt / "filler").unlink()
        p = _run(tmp_path, repo, "--continue")
        assert p.returncode == 0 and "warning" not in p.stderr
        assert path.read_bytes().startswith(before)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_prompt_history_in_a_fifo_or_huge_file_is_not_read(tmp_path):
    fifo = tmp_path / "history.jsonl"
    os.mkfifo(fifo)
    box = []
    worker = threading.Thread(target=lambda: box.append(PromptHistory(fifo)), daemon=True)
    worker.start()
    worker.join(60)
    assert box and box[0].entries == []
    box[0].add("kept in memory")  # no reader: the non-blocking open fails, nothing hangs
    assert box[0].entries == ["kept in memory"]
