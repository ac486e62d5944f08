"""Headless driving: approvals answered, a shared in-process backend serialized, crashes contained."""
from __future__ import annotations

import io
import json
import threading

from modes_helpers import FIXED, add_test_patch, make_calc_repo, tool_call, write_replay
from clover_cli.agent import Agent, AgentConfig
from clover_cli.agent.backends.base import Completion
from clover_cli.agent.backends.replay import ReplayBackend
from clover_cli.agent.backends.lifetime import BackendProvider, LockedBackend
from clover_cli.modes.headless import drive_turn
from clover_cli.modes.swebench.run import BatchOptions, run_batch


def test_locked_backend_serializes_generation_and_drives_an_agent(tmp_path, calc_repo):
    replay = write_replay(tmp_path / "r.json", ["x" * 64, "y" * 64])
    shared = LockedBackend(ReplayBackend(replay, chunk_chars=8, delay=0.01))
    order: list[int] = []  # which stream each item came from, as they came

    def consume(k):
        items = []
        for item in shared.stream([{"role": "user", "content": "hi"}], []):
            order.append(k)
            items.append(item)
        assert isinstance(items[-1], Completion)

    threads = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(order, key=order.index) == order and set(order) == {0, 1}  # one whole stream, then the other
    assert shared.calls == 2 and shared.info["name"] == "replay:r.json"
    shared.threshold = 0.5                       # settable through the wrapper
    assert shared._backend.threshold == 0.5

    repo, _ = calc_repo
    edit = write_replay(tmp_path / "edit.json", [
        tool_call("run_shell", command="echo hello"),
        tool_call("edit_file", path="calc.py", old="return a - b", new="return a + b"), "done"])
    agent = Agent(LockedBackend(ReplayBackend(edit)), AgentConfig(root=repo, approval="ask"))
    log = io.StringIO()
    record = drive_turn(agent, "fix add", log=log)     # "ask": every call needs a yes; we answer yes
    assert record.reason == "done" and record.tool_calls == 2 and record.tool_failures == 0
    assert (repo / "calc.py").read_text() == FIXED
    assert "-> run_shell" in log.getvalue() and "ok edit_file" in log.getvalue()


def test_provider_shares_in_process_and_refreshes_others(tmp_path):
    replay = write_replay(tmp_path / "r.json", ["a"])
    made = []

    def factory(spec):
        made.append(spec)
        return ReplayBackend(spec.split(":", 1)[1])

    per_call = BackendProvider(f"replay:{replay}", factory, in_process=False)
    assert per_call.get() is not per_call.get() and len(made) == 2
    shared = BackendProvider(f"replay:{replay}", factory, in_process=True)
    assert shared.get() is shared.get() and len(made) == 3
    assert isinstance(shared.get(), LockedBackend)


def test_agent_crash_is_reported_and_the_batch_goes_on(tmp_path):
    repos = tmp_path / "repos"
    base = make_calc_repo(repos / "o__calc", with_test=False)
    rows = [{"instance_id": f"i{n}", "repo": "o/calc", "base_commit": base, "problem_statement": "fix add",
             "FAIL_TO_PASS": ["tests/test_add.py::test_add"], "test_patch": add_test_patch()} for n in range(3)]
    (tmp_path / "inst.json").write_text(json.dumps(rows))
    replay = write_replay(tmp_path / "r.json", [
        tool_call("edit_file", path="calc.py", old="return a - b", new="return a + b"), "done"])
    calls = []

    def factory(spec):
        calls.append(spec)
        if len(calls) == 2:
            raise RuntimeError("model exploded")
        return ReplayBackend(replay)

    opts = BatchOptions(instances=tmp_path / "inst.json", output=tmp_path / "p.jsonl", model=f"replay:{replay}",
                        repos_dir=repos, workers=1)
    stream = io.StringIO()
    report = run_batch(opts, factory, in_process=False, progress_stream=stream)
    statuses = {k: v["status"] for k, v in report.instances.items()}
    assert sorted(statuses.values()) == ["done", "done", "error"]
    crashed = next(v for v in report.instances.values() if v["status"] == "error")
    assert crashed["error"] == "RuntimeError: model exploded"
    preds = [json.loads(ln) for ln in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(preds) == 2 and all("+    return a + b" in p["model_patch"] for p in preds)
    assert "3/3 ok 2 err 1" in stream.getvalue()


def test_drive_turn_records_a_failure_as_an_error_and_never_raises(tmp_path, calc_repo):
    repo, _ = calc_repo
    script = write_replay(tmp_path / "s.json", [tool_call("run_shell", command="touch hi"), "done"])
    agent = Agent(ReplayBackend(script), AgentConfig(root=repo, approval="ask"))

    def approve(request):
        raise RuntimeError("policy exploded")

    log = io.StringIO()
    record = drive_turn(agent, "go", log=log, approve=approve)   # runs on the turn driver's worker
    assert record.reason == "error" and record.errors == ["RuntimeError: policy exploded"]
    assert "error: RuntimeError: policy exploded" in log.getvalue()
