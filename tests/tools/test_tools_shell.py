"""run_shell with real subprocesses: exit codes, timeouts that kill children, capped output."""
from __future__ import annotations

import time

from clover_cli.tools.registry import run_tool


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_exit_code_output_and_cwd(plain_dir):
    res = run_tool("run_shell", {"command": "pwd; echo err >&2; exit 3"}, plain_dir)
    assert not res.ok and res.details["exit_code"] == 3
    assert str(plain_dir.resolve()) in res.output and "err" in res.output
    assert "[exit code 3]" in res.output
    ok = run_tool("run_shell", {"command": "true"}, plain_dir)
    assert ok.ok and ok.details["exit_code"] == 0


def test_no_stdin(plain_dir):
    started = time.monotonic()
    res = run_tool("run_shell", {"command": "cat; read x; echo done"}, plain_dir)
    assert res.ok and "done" in res.output
    assert time.monotonic() - started < 5


def test_timeout_kills_the_whole_group(plain_dir):
    cmd = "sleep 1000 & echo $! > bg.pid; sleep 1000"
    started = time.monotonic()
    res = run_tool("run_shell", {"command": cmd, "timeout": 1}, plain_dir)
    assert time.monotonic() - started < 6
    assert not res.ok and res.details["timed_out"] and "timed out after 1 s" in res.output
    pid = int((plain_dir / "bg.pid").read_text())
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_background_child_does_not_hang_a_finished_command(plain_dir):
    started = time.monotonic()
    res = run_tool("run_shell", {"command": "sleep 1000 & echo $! > bg.pid; echo quick"}, plain_dir)
    assert res.ok and "quick" in res.output and time.monotonic() - started < 5
    assert "background processes" in res.output
    pid = int((plain_dir / "bg.pid").read_text())
    time.sleep(0.2)
    assert not _alive(pid)


def test_huge_output_keeps_head_and_tail(plain_dir):
    res = run_tool("run_shell", {"command": "seq 1 200000"}, plain_dir)
    assert res.ok
    assert res.output.startswith("1\n2\n3\n")
    assert "200000\n[exit code 0]" in res.output
    assert res.details["elided_chars"] > 1_000_000 and res.details["elided_lines"] > 190_000
    assert f"{res.details['elided_chars']} characters" in res.output
    assert len(res.output) < 20_000


def test_streaming_callback_and_default_timeout(plain_dir):
    chunks = []
    res = run_tool("run_shell", {"command": "echo one; sleep 0.2; echo two"}, plain_dir,
                   on_output=chunks.append, timeout=30)
    assert res.ok and "".join(chunks) == "one\ntwo\n"
    slow = run_tool("run_shell", {"command": "sleep 5"}, plain_dir, timeout=0.5)
    assert slow.details["timed_out"]


def test_invalid_utf8_output_is_replaced(plain_dir):
    res = run_tool("run_shell", {"command": "printf 'ok \\377\\376 done\\n'"}, plain_dir)
    assert res.ok and "ok \ufffd\ufffd done" in res.output


def test_env_has_no_pager(plain_dir):
    res = run_tool("run_shell", {"command": "echo $GIT_PAGER-$TERM"}, plain_dir)
    assert "cat-dumb" in res.output


def _wait_dead(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def test_redirected_background_child_does_not_outlive_the_call(plain_dir):
    cmd = "sleep 1002 >/dev/null 2>&1 & echo $! > bg.pid; echo started"
    try:
        res = run_tool("run_shell", {"command": cmd}, plain_dir)
        assert res.ok and "started" in res.output
        assert "background processes" in res.output
        pid = int((plain_dir / "bg.pid").read_text())
        assert _wait_dead(pid, 0.5)
    finally:
        if (plain_dir / "bg.pid").exists():
            import os
            import signal
            try:
                os.kill(int((plain_dir / "bg.pid").read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_cancel_kills_the_group_promptly(plain_dir):
    import threading
    cancel = threading.Event()
    cmd = "sleep 1003 >/dev/null 2>&1 & echo $! > bg.pid; echo running; sleep 1003"
    box = {}

    def go():
        box["res"] = run_tool("run_shell", {"command": cmd}, plain_dir, cancel=cancel)
        box["done"] = time.monotonic()

    worker = threading.Thread(target=go)
    worker.start()
    deadline = time.monotonic() + 5
    while not (plain_dir / "bg.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    pid = int((plain_dir / "bg.pid").read_text())
    set_at = time.monotonic()
    cancel.set()
    worker.join(5)
    if not _wait_dead(pid, 0.5):  # never leave a sleeper behind, even when the assertions below fail
        import os
        import signal
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the background child survived the cancellation")
    assert not worker.is_alive()
    res = box["res"]
    assert box["done"] - set_at < 0.5
    assert not res.ok and res.details["cancelled"] is True and not res.details["timed_out"]
    assert "cancelled" in res.output and "running" in res.output
    assert _wait_dead(pid, 0.5)


def test_cancel_already_set_and_unset_event(plain_dir):
    import threading
    cancel = threading.Event()
    res = run_tool("run_shell", {"command": "echo fine"}, plain_dir, cancel=cancel)
    assert res.ok and "fine" in res.output and "cancelled" not in res.details
    cancel.set()
    started = time.monotonic()
    res = run_tool("run_shell", {"command": "sleep 1004"}, plain_dir, cancel=cancel)
    assert not res.ok and res.details["cancelled"] and time.monotonic() - started < 0.5
    (plain_dir / "a.txt").write_text("x\n")
    other = run_tool("read_file", {"path": "a.txt"}, plain_dir, cancel=cancel)
    assert other.ok and "x" in other.output  # tools other than run_shell ignore it
