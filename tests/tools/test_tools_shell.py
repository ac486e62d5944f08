"""run_shell with real subprocesses: exit codes, timeouts that kill children, capped output.

These run without the OS sandbox (CLOVER_SANDBOX=off: the subreaper path, host pids in `$!`);
tests/tools/test_tools_sandbox.py covers bubblewrap."""
from __future__ import annotations

import time

import pytest

from clover_cli.tools import sandbox
from clover_cli.tools.registry import run_tool


@pytest.fixture(autouse=True)
def _no_sandbox(monkeypatch):
    monkeypatch.setenv("CLOVER_SANDBOX", "off")
    sandbox.reset_probe()
    sandbox.take_notice("workspace")  # the one-time notice is tested in test_tools_sandbox.py
    yield
    sandbox.reset_probe()


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
    res = run_tool("run_shell", {"command": "cat; read x; echo done"}, plain_dir)
    assert res.ok and "done" in res.output  # a stdin left open would end in the timeout instead


def test_timeout_kills_the_whole_group(plain_dir):
    cmd = "sleep 1000 & echo $! > bg.pid; sleep 1000"
    started = time.monotonic()
    res = run_tool("run_shell", {"command": cmd, "timeout": 1}, plain_dir)
    assert time.monotonic() - started < 60  # a hang guard: the command itself sleeps 1000 s
    assert not res.ok and res.details["timed_out"] and "timed out after 1 s" in res.output
    assert _wait_dead(int((plain_dir / "bg.pid").read_text()))


def test_background_child_does_not_hang_a_finished_command(plain_dir):
    started = time.monotonic()
    res = run_tool("run_shell", {"command": "sleep 1000 & echo $! > bg.pid; echo quick"}, plain_dir)
    assert res.ok and "quick" in res.output
    assert time.monotonic() - started < 60  # a hang guard: waiting on the child would reach the 120 s timeout
    assert "background processes" in res.output
    assert _wait_dead(int((plain_dir / "bg.pid").read_text()))


def test_huge_output_keeps_head_and_tail(plain_dir):
    res = run_tool("run_shell", {"command": "seq 1 200000"}, plain_dir)
    assert res.ok
    assert res.output.startswith("1\n2\n3\n")
    assert "200000\n[exit code 0]" in res.output
    assert res.details["elided_bytes"] > 1_000_000 and res.details["elided_lines"] > 170_000
    assert f"[... {res.details['elided_bytes']} bytes (" in res.output
    assert len(res.output) < 140_000


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


def _wait_dead(pid: int, seconds: float = 30.0) -> bool:
    """Whether pid is gone (or a zombie) within `seconds`: a hang guard, it returns at the death."""
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
        assert _wait_dead(pid)
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
    running = threading.Event()

    def go():
        box["res"] = run_tool("run_shell", {"command": cmd}, plain_dir, cancel=cancel,
                              on_output=lambda text: "running" in text and running.set())
        box["done"] = time.monotonic()

    worker = threading.Thread(target=go)
    worker.start()
    assert running.wait(60)  # bg.pid is written before "running" is printed
    pid = int((plain_dir / "bg.pid").read_text())
    set_at = time.monotonic()
    cancel.set()
    worker.join(60)
    if not _wait_dead(pid):  # never leave a sleeper behind, even when the assertions below fail
        import os
        import signal
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the background child survived the cancellation")
    assert not worker.is_alive()
    res = box["res"]
    assert box["done"] - set_at < 60  # a hang guard: without the cancel the command runs to its 120 s timeout
    assert not res.ok and res.details["cancelled"] is True and not res.details["timed_out"]
    assert "cancelled" in res.output and "running" in res.output


def test_cancel_already_set_and_unset_event(plain_dir):
    import threading
    cancel = threading.Event()
    res = run_tool("run_shell", {"command": "echo fine"}, plain_dir, cancel=cancel)
    assert res.ok and "fine" in res.output and "cancelled" not in res.details
    cancel.set()
    started = time.monotonic()
    res = run_tool("run_shell", {"command": "sleep 1004"}, plain_dir, cancel=cancel)
    assert not res.ok and res.details["cancelled"] and time.monotonic() - started < 60  # vs its 120 s timeout
    (plain_dir / "a.txt").write_text("x\n")
    other = run_tool("read_file", {"path": "a.txt"}, plain_dir, cancel=cancel)
    assert other.ok and "x" in other.output  # tools other than run_shell ignore it


def _procs_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker`."""
    from pathlib import Path
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode() and _alive(int(entry.name)):
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def _cleanup(marker: str) -> None:
    import os
    import signal
    for pid in _procs_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("escape", ["setsid sleep 1011.5 &", "python3 -c 'import os,time; os.setpgrp(); time.sleep(1011.5)' &",
                                    "setsid -f sleep 1011.5 >/dev/null 2>&1;"])
def test_children_that_leave_the_group_die_when_the_command_ends(plain_dir, escape):
    try:
        res = run_tool("run_shell", {"command": f"{escape} echo started"}, plain_dir)
        assert res.ok and "started" in res.output
        deadline = time.monotonic() + 30  # a hang guard: the loop ends when they are gone
        while _procs_with("1011.5") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _procs_with("1011.5") == []
        assert "background processes" in res.output
    finally:
        _cleanup("1011.5")


def test_children_that_leave_the_group_die_on_timeout(plain_dir):
    try:
        started = time.monotonic()
        res = run_tool("run_shell", {"command": "setsid sleep 1012.5 & sleep 1012.5", "timeout": 1}, plain_dir)
        assert res.details["timed_out"] and time.monotonic() - started < 60  # hang guard: it sleeps 1012 s
        deadline = time.monotonic() + 30
        while _procs_with("1012.5") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _procs_with("1012.5") == []
    finally:
        _cleanup("1012.5")


def test_timeout_is_capped_by_the_users_limit(plain_dir, monkeypatch):
    res = run_tool("run_shell", {"command": "sleep 1013.5", "timeout": 1e15}, plain_dir, timeout=1)
    assert res.details["timed_out"] and res.details["timeout"] == 1
    assert "capped to the limit of 1 s" in res.output
    quick = run_tool("run_shell", {"command": "echo hi", "timeout": 5000}, plain_dir)
    assert quick.ok and quick.details["timeout"] == 600 and "capped" in quick.output
    monkeypatch.setenv("CLOVER_SHELL_MAX_TIMEOUT", "30")
    assert run_tool("run_shell", {"command": "true", "timeout": 99}, plain_dir).details["timeout"] == 30
    assert run_tool("run_shell", {"command": "true"}, plain_dir, timeout=300).details["timeout"] == 300
    for bad in (-1, 0, "-5"):
        res = run_tool("run_shell", {"command": "touch ran", "timeout": bad}, plain_dir)
        assert not res.ok and res.details["error"] == "bad_arguments" and "positive" in res.output, bad
    from clover_cli.tools.shell import run_shell
    for bad in (float("nan"), float("-inf"), "soon"):
        res = run_shell(plain_dir, "touch ran", timeout=bad)
        assert not res.ok and res.details["error"] == "bad_arguments", bad
    assert not (plain_dir / "ran").exists()
    inf = run_shell(plain_dir, "true", timeout=float("inf"), max_timeout=2)
    assert inf.ok and inf.details["timeout"] == 2


def test_a_huge_output_costs_bounded_memory(plain_dir):
    import resource
    chunks = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    res = run_tool("run_shell", {"command": "yes 0123456789abcdef | head -c 300000000; echo; echo END"},
                   plain_dir, on_output=chunks.append)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert res.ok and res.output.rstrip().endswith("END\n[exit code 0]")
    assert res.details["elided_bytes"] > 299_000_000
    assert len(res.output) < 140_000
    assert sum(len(c) for c in chunks) < 300 * 1024  # the live stream stops after 256 KiB, with a note
    assert "live output stopped" in chunks[-1]
    assert grown < 60 * 1024, f"peak RSS grew by {grown} KiB"
