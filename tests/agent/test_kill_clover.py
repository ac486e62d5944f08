"""Killing `clover run` (SIGKILL, SIGTERM, SIGHUP) while a shell command runs leaves nothing behind:
the command, its setsid children and the subreaper die with Clover, sandboxed or not, and the
session can be continued afterwards. Real `clover run` processes with a scripted (replay) model."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .helpers import call, make_repo, replay

SCRIPT = ("import subprocess, time\n"
          "subprocess.Popen(['sleep', '{t}1'], start_new_session=True)\n"  # a setsid child
          "subprocess.Popen(['sleep', '{t}2'])\n"
          "subprocess.run(['sleep', '{t}3'])\n")


def _pids(tag: str) -> list[int]:
    """Host pids of live processes whose command line holds `tag` (works across pid namespaces)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if f"sleep {tag}" in cmd and state != "Z":
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _started(tag: str, deadline: float = 30) -> list[int]:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        pids = _pids(tag)
        if len(pids) == 3:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"the command did not start: {_pids(tag)}")


def _default_signals() -> None:
    """In the child: the signals' default dispositions, as a terminal's process has them. An
    ignored signal stays ignored across exec, so under `nohup` (SIGHUP ignored) or a shell's
    background job (SIGINT) Clover would rightly keep running and the case would test nothing."""
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig, sandbox", [  # real processes, ~1.2 s each: one in the quick tier
    (signal.SIGKILL, "off"), pytest.param(signal.SIGTERM, "off", marks=pytest.mark.slow),
    pytest.param(signal.SIGHUP, "off", marks=pytest.mark.slow),
    pytest.param(signal.SIGKILL, "auto", marks=pytest.mark.slow)])
def test_killing_clover_kills_its_commands(tmp_path, sig, sandbox):
    repo = make_repo(tmp_path / "repo", git=True)
    tag = f"10{int(sig)}{len(sandbox)}"  # a sleep length of its own per case
    (repo / "run.py").write_text(SCRIPT.format(t=tag))
    spec = replay(tmp_path, [call("run_shell", command="python3 run.py", timeout=300), "never"])
    env = dict(os.environ, PYTHONUNBUFFERED="1", CLOVER_SANDBOX=sandbox)
    approval = "yolo" if sandbox == "off" else "auto-edit"
    argv = [sys.executable, "-m", "clover_cli.cli", "run", "wait", "--model", spec, "--root", str(repo),
            "--approval", approval, "--json"]
    if sandbox != "off":
        argv += ["--shell-allow", "python3 run.py"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True,  # our own signal only: not the test's group
                            preexec_fn=_default_signals)
    try:
        pids = _started(tag)
        proc.send_signal(sig)
        proc.wait(timeout=60)  # hang guards: they end at the exit and at the deaths
        end = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < end:
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], (pids, proc.stderr.read()[-2000:])
    finally:
        proc.kill()
        proc.wait()
        for pid in _pids(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    # the session was saved and continues: a second run with -c finds it
    spec2 = replay(tmp_path, ["Done."], "again.json")
    again = subprocess.run([sys.executable, "-m", "clover_cli.cli", "run", "go on", "--continue", "--model", spec2,
                            "--root", str(repo), "--approval", approval, "--json"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0, again.stderr[-2000:]
    assert any(json.loads(l).get("type") == "turn_end" for l in again.stdout.splitlines())
