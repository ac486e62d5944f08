"""How many intra-op threads torch gets for CPU decoding (docs/engine.md, "CPU threads").

`choose_threads` is the policy, a pure function of what it is told; `cpu_snapshot` reads those
inputs from this machine (affinity, cgroup quota, a short /proc/stat sample of other work);
`apply_cpu_threads` ties them together for a loaded model.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

THREADS_ENV = "CLOVER_TORCH_THREADS"
SMALL_MODEL_PARAMS = 50_000_000
BUSY_CORE = 0.25  # other work above this share of a core makes that core count as taken
SAMPLE_SECONDS = 0.2
log = logging.getLogger("clover.engine")


@dataclass(frozen=True)
class CpuSnapshot:
    """What the policy needs to know about the machine."""

    cores: int  # CPUs the kernel has online (os.cpu_count())
    affinity: int | None = None  # CPUs this process may run on (sched_getaffinity); None: unknown
    quota: float | None = None  # the cgroup's CPU quota in cores (cpu.max); None: no quota
    busy: float | None = None  # cores other work kept busy during the sample; None: not sampled


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count and why, in words (shown by whoever reports `Engine.threads`)."""

    threads: int
    reason: str


def usable_cores(snap: CpuSnapshot) -> int:
    """CPUs this process can use at once: the affinity set, capped by a cgroup quota (whole cores,
    at least one: a quota of 1.5 cores runs one thread rather than be throttled at two)."""
    n = snap.affinity or snap.cores
    if snap.quota is not None:
        n = min(n, math.floor(snap.quota))
    return max(1, n)


def choose_threads(snap: CpuSnapshot, params: int, env: str | None = None,
                   omp: str | None = None) -> ThreadChoice:
    """The intra-op thread count for a CPU model of `params` parameters.

    `env` (CLOVER_TORCH_THREADS) wins when it is a positive integer; any other non-empty value is
    ignored, and the reason says so. Otherwise: one thread below SMALL_MODEL_PARAMS; else one
    thread per usable core that other work leaves free (a core counts as taken once other work
    uses more than BUSY_CORE of one), at least one, and at most `omp` (OMP_NUM_THREADS) when that
    is a positive integer.
    """
    if env_threads(env) is not None:
        return ThreadChoice(env_threads(env), f"{THREADS_ENV}={env.strip()}")
    note = f"{THREADS_ENV}={env!r} ignored (not a positive integer); " if (env or "").strip() else ""
    if params < SMALL_MODEL_PARAMS:
        return ThreadChoice(1, f"{note}small model ({params / 1e6:.0f}M parameters): 1 thread")
    usable = usable_cores(snap)
    if usable == 1 or snap.busy is None:
        threads, why = usable, f"{usable} usable core(s)"
    else:
        threads = max(1, usable - math.ceil(max(0.0, snap.busy - BUSY_CORE)))
        why = f"{threads} of {usable} usable cores free (other work busy on {snap.busy:.1f})"
    cap = env_threads(omp)
    if cap is not None and cap < threads:
        threads, why = cap, f"OMP_NUM_THREADS={cap} ({why})"
    return ThreadChoice(threads, note + why)


def env_threads(env: str | None) -> int | None:
    """The thread count an environment value (CLOVER_TORCH_THREADS, OMP_NUM_THREADS) asks for;
    None when unset or not a positive integer."""
    value = (env or "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota in cores from cgroup v2's cpu.max or v1's cpu.cfs_quota_us; None: none."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def _cpu_ticks(cpus: set[int] | None) -> tuple[int, int] | None:
    """(busy, total) jiffies summed over `cpus` (None: all) from /proc/stat; None: unreadable."""
    busy = total = 0
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or (cpus is not None and int(name[3:]) not in cpus):
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return (busy, total) if total else None


def busy_cores(seconds: float = SAMPLE_SECONDS, cpus: set[int] | None = None) -> float | None:
    """Cores kept busy over `seconds` on `cpus` (None: all) while this thread sleeps: the work of
    other processes (and of this process's other threads). None where /proc/stat is unreadable."""
    before = _cpu_ticks(cpus)
    time.sleep(seconds)
    after = _cpu_ticks(cpus)
    if before is None or after is None or after[1] <= before[1]:
        return None
    n = len(cpus) if cpus else (os.cpu_count() or 1)
    return n * (after[0] - before[0]) / (after[1] - before[1])


def cpu_snapshot(sample: bool = True) -> CpuSnapshot:
    """This machine's cores, affinity and cgroup quota; with `sample`, the busy cores too."""
    try:
        affinity = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        affinity = None
    snap = CpuSnapshot(cores=os.cpu_count() or 1, affinity=len(affinity) if affinity else None,
                       quota=cgroup_quota())
    if sample and usable_cores(snap) > 1:
        snap = CpuSnapshot(snap.cores, snap.affinity, snap.quota, busy_cores(cpus=affinity))
    return snap


def policy_threads(params: int) -> ThreadChoice:
    """choose_threads for a CPU model of `params` parameters on this machine, now (the load
    sample is taken only where it can change the answer)."""
    env, omp = os.environ.get(THREADS_ENV), os.environ.get("OMP_NUM_THREADS")
    sample = params >= SMALL_MODEL_PARAMS and env_threads(env) is None and env_threads(omp) != 1
    return choose_threads(cpu_snapshot(sample=sample), params, env, omp)


def apply_cpu_threads(model) -> ThreadChoice | None:
    """Choose and set torch's intra-op threads for `model`; None (untouched) for a model that is
    not on the CPU (CUDA). A bad CLOVER_TORCH_THREADS is logged (one line) and ignored."""
    import torch

    param = next(model.parameters(), None)
    if param is not None and param.device.type != "cpu":
        return None
    choice = policy_threads(sum(p.numel() for p in model.parameters()))
    env = os.environ.get(THREADS_ENV)
    if env_threads(env) is None and (env or "").strip():
        log.warning("clover: %s=%r is not a positive integer; ignored", THREADS_ENV, env)
    torch.set_num_threads(choice.threads)
    return choice


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's intra-op thread count set to `n` inside the block, the caller's restored after."""
    import torch

    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)


@dataclass(frozen=True)
class Reading:
    """One look at the machine: wall time, /proc/stat busy and total jiffies over the usable CPUs,
    and this process's own CPU seconds (all its threads)."""

    wall: float
    busy_ticks: int
    total_ticks: int
    own_seconds: float


def take_reading(cpus: set[int] | None = None) -> Reading | None:
    """A Reading now; None where /proc/stat cannot be read."""
    ticks = _cpu_ticks(cpus)
    if ticks is None:
        return None
    own = os.times()
    return Reading(time.monotonic(), ticks[0], ticks[1], own.user + own.system)


def others_busy(before: Reading, after: Reading, hz: int) -> float | None:
    """Cores other work kept busy between two readings: all the CPUs' busy time less this
    process's own, over the wall time between them; None when too little time passed to tell."""
    wall = after.wall - before.wall
    if wall < MIN_INTERVAL_S or after.total_ticks <= before.total_ticks:
        return None
    busy = (after.busy_ticks - before.busy_ticks) / hz - (after.own_seconds - before.own_seconds)
    return max(0.0, busy / wall)


MIN_INTERVAL_S = 0.5  # shorter gaps between two requests say too little about other work


class ThreadGovernor:
    """Follows other work between requests (docs/engine.md, "CPU threads"): `refresh()`, called as a
    request starts, measures what other processes used since the previous call (the machine's busy
    time less ours, so no sleep and no latency) and sets torch's thread count by the same rule
    as at load. Inert where the count is fixed: CLOVER_TORCH_THREADS, OMP_NUM_THREADS=1, a small
    model, one usable core, a model off the CPU."""

    def __init__(self, params: int, choice: ThreadChoice | None):
        env, omp = os.environ.get(THREADS_ENV), os.environ.get("OMP_NUM_THREADS")
        self.params, self.choice, self.omp = params, choice, omp
        try:
            self.cpus = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            self.cpus = None
        self.snap = cpu_snapshot(sample=False)
        self.active = (choice is not None and params >= SMALL_MODEL_PARAMS and env_threads(env) is None
                       and env_threads(omp) != 1 and usable_cores(self.snap) > 1)
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.mark = take_reading(self.cpus) if self.active else None

    def refresh(self) -> ThreadChoice | None:
        """The choice for the request about to run (set in torch when it changed); None: inert."""
        if not self.active:
            return None
        now = take_reading(self.cpus)
        if now is None or self.mark is None:
            return None
        busy = others_busy(self.mark, now, self.hz)
        self.mark = now
        if busy is None:
            return self.choice
        snap = CpuSnapshot(self.snap.cores, self.snap.affinity, self.snap.quota, busy)
        choice = choose_threads(snap, self.params, None, self.omp)
        if self.choice is None or choice.threads != self.choice.threads:
            import torch

            torch.set_num_threads(choice.threads)
        self.choice = choice
        return choice
