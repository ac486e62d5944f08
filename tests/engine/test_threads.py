"""The CPU thread policy (engine/threads.py, docs/engine.md "CPU threads"): the choice as a function
of the cores, affinity, cgroup quota, a load sample and CLOVER_TORCH_THREADS, all passed in; then
that the engine applies it to a real model and leaves a non-CPU model's threads alone."""
from __future__ import annotations

import os

import pytest
import torch

from clover_cli.engine.threads import (SMALL_MODEL_PARAMS, THREADS_ENV, CpuSnapshot, apply_cpu_threads,
                                       busy_cores, cgroup_quota, choose_threads, cpu_snapshot,
                                       usable_cores)

BIG = 135_000_000  # SmolLM2-135M's size: at or above SMALL_MODEL_PARAMS
SMALL = 2_000_000


@pytest.fixture
def keep_torch_threads():
    """Give later tests the thread count this test found."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_big_model_gets_every_usable_core_on_an_idle_machine():
    assert choose_threads(CpuSnapshot(cores=2, affinity=2, busy=0.0), BIG).threads == 2
    assert choose_threads(CpuSnapshot(cores=16, affinity=16, busy=0.1), BIG).threads == 16


def test_cores_that_other_work_keeps_busy_are_left_to_it():
    assert choose_threads(CpuSnapshot(cores=2, affinity=2, busy=1.0), BIG).threads == 1
    assert choose_threads(CpuSnapshot(cores=2, affinity=2, busy=2.0), BIG).threads == 1  # never 0
    assert choose_threads(CpuSnapshot(cores=8, affinity=8, busy=2.0), BIG).threads == 6
    assert choose_threads(CpuSnapshot(cores=8, affinity=8, busy=2.3), BIG).threads == 5  # part-busy: taken
    choice = choose_threads(CpuSnapshot(cores=2, affinity=2, busy=1.0), BIG)
    assert "1 of 2" in choice.reason


def test_a_little_background_work_does_not_take_a_core():
    assert choose_threads(CpuSnapshot(cores=4, affinity=4, busy=0.2), BIG).threads == 4


def test_a_small_model_runs_on_one_thread_whatever_the_machine():
    for snap in (CpuSnapshot(cores=2, affinity=2, busy=0.0), CpuSnapshot(cores=64)):
        assert choose_threads(snap, SMALL).threads == 1
    assert choose_threads(CpuSnapshot(cores=64), SMALL_MODEL_PARAMS).threads == 64  # the boundary is big


def test_affinity_and_cgroup_quota_bound_the_cores_counted():
    assert usable_cores(CpuSnapshot(cores=64, affinity=2)) == 2
    assert usable_cores(CpuSnapshot(cores=64, affinity=64, quota=4.0)) == 4
    assert usable_cores(CpuSnapshot(cores=64, affinity=2, quota=4.0)) == 2
    assert usable_cores(CpuSnapshot(cores=64, quota=1.5)) == 1  # whole cores: not throttled at two
    assert usable_cores(CpuSnapshot(cores=64, quota=0.5)) == 1  # never 0
    assert choose_threads(CpuSnapshot(cores=64, affinity=64, quota=4.0, busy=0.0), BIG).threads == 4
    assert choose_threads(CpuSnapshot(cores=64, affinity=4, busy=1.0), BIG).threads == 3


def test_omp_num_threads_caps_the_count_and_the_variable_still_wins():
    idle = CpuSnapshot(cores=8, affinity=8, busy=0.0)
    assert choose_threads(idle, BIG, omp="3").threads == 3
    assert "OMP_NUM_THREADS=3" in choose_threads(idle, BIG, omp="3").reason
    assert choose_threads(CpuSnapshot(cores=8, affinity=8, busy=7.0), BIG, omp="3").threads == 1
    assert choose_threads(idle, BIG, omp="16").threads == 8  # a cap, not a request
    assert choose_threads(idle, BIG, omp="many").threads == 8  # not a number: no cap
    assert choose_threads(idle, BIG, env="5", omp="3").threads == 5


def test_without_a_load_sample_every_usable_core_is_used():
    assert choose_threads(CpuSnapshot(cores=8, affinity=4, busy=None), BIG).threads == 4


@pytest.mark.parametrize("snap,params", [(CpuSnapshot(cores=2, affinity=2, busy=2.0), BIG),
                                         (CpuSnapshot(cores=2, affinity=2, busy=0.0), SMALL),
                                         (CpuSnapshot(cores=1), BIG)])
def test_the_environment_variable_wins(snap, params):
    choice = choose_threads(snap, params, env=" 3 ")
    assert choice.threads == 3
    assert THREADS_ENV in choice.reason


@pytest.mark.parametrize("bad", ["two", "0", "-1", "1.5", "2x"])
def test_a_bad_environment_value_is_ignored_and_the_reason_says_so(bad):
    snap = CpuSnapshot(cores=2, affinity=2, busy=1.0)
    choice = choose_threads(snap, BIG, env=bad)
    assert choice.threads == choose_threads(snap, BIG).threads == 1
    assert f"{THREADS_ENV}={bad!r} ignored" in choice.reason


def test_an_empty_environment_value_counts_as_unset():
    snap = CpuSnapshot(cores=2, affinity=2, busy=0.0)
    assert choose_threads(snap, BIG, env="  ") == choose_threads(snap, BIG)


def test_cgroup_quota_reads_v2_and_v1_files(tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(v2) is None
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cgroup_quota(v2) == 1.5
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(v1) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    assert cgroup_quota(v1) == 3.0
    assert cgroup_quota(tmp_path / "absent") is None


def test_this_machines_snapshot_is_within_its_bounds():
    snap = cpu_snapshot()
    assert 1 <= usable_cores(snap) <= snap.cores
    busy = busy_cores(0.05)
    assert busy is None or 0.0 <= busy <= snap.cores + 1e-9


class _Big(torch.nn.Module):
    """SMALL_MODEL_PARAMS parameters, never touched (torch.empty: no pages written)."""

    def __init__(self, device: str = "cpu"):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(SMALL_MODEL_PARAMS, device=device), requires_grad=False)


def test_the_engine_applies_the_environment_variable(tiny_dirs, monkeypatch, caplog, keep_torch_threads):
    from clover_cli.engine.engine import Engine, configure_cpu_threads
    from clover_cli.engine.loader import load_model

    lm = load_model(str(tiny_dirs["clover"]))
    monkeypatch.setenv(THREADS_ENV, "3")
    engine = Engine(lm)
    assert engine.threads == 3 == torch.get_num_threads()
    assert THREADS_ENV in engine.threads_reason
    monkeypatch.setenv(THREADS_ENV, "nope")
    with caplog.at_level("WARNING", logger="clover.engine"):
        assert configure_cpu_threads(lm.model) == 1 == torch.get_num_threads()  # a small model
    assert f"{THREADS_ENV}='nope' is not a positive integer; ignored" in caplog.text


def test_a_big_cpu_model_gets_the_policys_count(monkeypatch, keep_torch_threads):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    choice = apply_cpu_threads(_Big())
    assert 1 <= choice.threads <= usable_cores(cpu_snapshot(sample=False))
    assert torch.get_num_threads() == choice.threads
    assert "usable" in choice.reason
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert apply_cpu_threads(_Big()).threads == 1 == torch.get_num_threads()


def test_a_model_off_the_cpu_is_left_alone(monkeypatch, keep_torch_threads):
    torch.set_num_threads(1)
    monkeypatch.setenv(THREADS_ENV, "2")
    assert apply_cpu_threads(_Big(device="meta")) is None  # the same branch a CUDA model takes
    assert torch.get_num_threads() == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_model_is_left_alone(monkeypatch, keep_torch_threads):
    torch.set_num_threads(1)
    monkeypatch.setenv(THREADS_ENV, "2")
    assert apply_cpu_threads(torch.nn.Linear(4, 4).cuda()) is None
    assert torch.get_num_threads() == 1


# ---- following other work between requests (ThreadGovernor) ------------------------------------

def test_others_busy_is_the_machines_busy_time_less_our_own():
    from clover_cli.engine.threads import Reading, others_busy

    before = Reading(wall=10.0, busy_ticks=1000, total_ticks=5000, own_seconds=3.0)
    after = Reading(wall=12.0, busy_ticks=1000 + 300, total_ticks=5400, own_seconds=3.0 + 0.8)
    assert others_busy(before, after, hz=100) == pytest.approx((3.0 - 0.8) / 2.0)
    ours_only = Reading(wall=12.0, busy_ticks=1000 + 160, total_ticks=5400, own_seconds=3.0 + 1.6)
    assert others_busy(before, ours_only, hz=100) == pytest.approx(0.0, abs=1e-9)
    too_soon = Reading(wall=10.1, busy_ticks=1010, total_ticks=5020, own_seconds=3.0)
    assert others_busy(before, too_soon, hz=100) is None


def test_the_governor_follows_other_work_between_requests(monkeypatch):
    import torch

    from clover_cli.engine.threads import Reading, ThreadChoice, ThreadGovernor, take_reading, torch_threads

    monkeypatch.delenv("CLOVER_TORCH_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    gov = ThreadGovernor(params=10**9, choice=ThreadChoice(2, "load"))
    if not gov.active:
        pytest.skip("one usable core: nothing to follow")
    hz = gov.hz
    with torch_threads(torch.get_num_threads()):
        now = take_reading(gov.cpus)
        usable = len(gov.cpus) if gov.cpus else os.cpu_count()
        # the last second: every usable core busy with other work
        gov.mark = Reading(now.wall - 1.0, now.busy_ticks - usable * hz, now.total_ticks - usable * hz,
                           now.own_seconds)
        assert gov.refresh().threads == 1 and torch.get_num_threads() == 1
        # the next second: nothing else ran
        now = take_reading(gov.cpus)
        gov.mark = Reading(now.wall - 1.0, now.busy_ticks, now.total_ticks - usable * hz, now.own_seconds)
        assert gov.refresh().threads == usable and torch.get_num_threads() == usable


def test_the_governor_is_inert_where_the_count_is_fixed(monkeypatch):
    from clover_cli.engine.threads import ThreadChoice, ThreadGovernor

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("CLOVER_TORCH_THREADS", "2")
    assert ThreadGovernor(10**9, ThreadChoice(2, "env")).refresh() is None
    monkeypatch.delenv("CLOVER_TORCH_THREADS")
    assert ThreadGovernor(1_000_000, ThreadChoice(1, "small")).refresh() is None
    assert ThreadGovernor(10**9, None).refresh() is None  # a model off the CPU
