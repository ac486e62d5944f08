"""Ctrl-C during `clover swebench`: running agents are cancelled, their commands stopped,
finished predictions kept, exit 130 without waiting for the tools."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from modes_helpers import alive, clover_env, make_calc_repo, sigint_default, tool_call, write_replay

pytestmark = pytest.mark.slow


def test_ctrl_c_cancels_every_worker_and_keeps_the_output(tmp_path):
    repos = tmp_path / "repos"
    rows = [{"instance_id": f"acme__{n}-1", "repo": f"acme/{n}", "problem_statement": "add() subtracts.",
             "base_commit": make_calc_repo(repos / f"acme__{n}", with_test=False)} for n in ("alpha", "beta")]
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "preds.jsonl"
    old = {"instance_id": "acme__old-1", "model_name_or_path": "clover/x", "model_patch": "diff --git a/x b/x\n"}
    out.write_text(json.dumps(old) + "\n")                              # an earlier run's prediction
    pids = tmp_path / "pids"
    pids.mkdir()
    sleeper = write_replay(tmp_path / "sleep.json", [
        tool_call("run_shell", command=f"echo $$ > {pids}/$(basename $PWD).pid; exec sleep 301"), "Done."])
    proc = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", "swebench", "--instances", str(instances),
                             "--output", str(out), "--model", f"replay:{sleeper}", "--repos-dir", str(repos),
                             "--workdir", str(tmp_path / "work"), "--workers", "2"],
                            cwd=tmp_path, env=clover_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=sigint_default)
    sleeping: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while len(sleeping) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
            sleeping = [int(t) for p in pids.glob("*.pid") if (t := p.read_text().strip())]
        assert len(sleeping) == 2, "both workers should be running their command"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=150)                             # did not wait out `sleep 301`
        assert proc.returncode == 130, err
        assert "interrupted" in err
        deadline = time.monotonic() + 30                                   # a hang guard: ends at the deaths
        while any(map(alive, sleeping)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(alive, sleeping)), "an agent's command outlived clover swebench"
        assert [json.loads(ln) for ln in out.read_text().splitlines()] == [old]   # nothing half-done added
        report = json.loads((tmp_path / "preds.report.json").read_text())
        for r in rows:
            entry = report["instances"][r["instance_id"]]
            assert entry["status"] == "error" and entry["error"].startswith("interrupted"), entry
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in sleeping:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
