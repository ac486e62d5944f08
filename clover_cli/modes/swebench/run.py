"""`clover swebench`: SWE-bench-style instances in, `preds.jsonl` (+ report, trajectories) out.

Per instance: a detached worktree of the local clone at base_commit, one headless agent turn
(approval "yolo": the worktree is disposable) on the problem statement, the patch = `git diff`
against base_commit (new files included, `.clover/` excluded), written to the predictions file at
once. Instances run on worker threads; any failure of one instance is recorded and the batch goes
on. Nothing is fetched from the network.
"""
from __future__ import annotations

import hashlib
import queue
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from clover_cli.agent.config import DEFAULT_MAX_STEPS
from clover_cli.modes.swebench.batch_eval import EVAL_MODES, cached_evaluation
from clover_cli.modes.swebench.evaluate import EvalOptions
from clover_cli.modes.headless import BackendProvider, drive_turn
from clover_cli.modes.swebench.instances import Instance, InstanceError
from clover_cli.modes.swebench.predictions import PredictionsFile
from clover_cli.modes.swebench.progress import Progress
from clover_cli.modes.swebench.report import BatchReport, report_path, trajectories_dir
from clover_cli.modes.worktree import WorktreeError, add_worktree, diff_worktree, find_clone, remove_worktree


class BatchError(ValueError):
    """Bad input for the whole batch (exit 2); one line for the user."""


@dataclass
class BatchOptions:
    """What `clover swebench` was asked to do."""

    instances: Path | None
    output: Path
    model: str
    repos_dir: Path = Path(".")
    workdir: Path | None = None  # None: a temporary folder, removed at the end
    workers: int = 1
    instance_ids: tuple[str, ...] = ()
    redo: bool = False
    evaluate: str = "none"  # "local" | "docker" | "none" (True/False: local/none)
    max_steps: int = DEFAULT_MAX_STEPS
    test_cmd: str | None = None  # evaluation command template ({tests} / {test})
    keep_worktrees: bool = False
    model_name: str | None = None
    test_timeout: float = 1800.0
    python: str | None = None  # force one interpreter for the tests (no environments built)
    env_dir: Path | None = None  # where per repo+version environments are cached
    dataset: str | None = None  # a dataset name (through `datasets`) instead of --instances
    split: str = "test"
    max_new_tokens: int | None = None  # per model call; None: the agent's default

    def __post_init__(self) -> None:
        if self.evaluate is True or self.evaluate is False:
            self.evaluate = "local" if self.evaluate else "none"
        if self.evaluate not in EVAL_MODES:
            raise BatchError(f"--evaluate must be one of {', '.join(EVAL_MODES)}")
        if self.instances is None and not self.dataset:
            raise BatchError("give --instances FILE or --dataset NAME")
        self.instances = Path(self.instances).expanduser() if self.instances is not None else None
        self.env_dir = Path(self.env_dir).expanduser() if self.env_dir else None
        self.output = Path(self.output).expanduser()
        self.repos_dir = Path(self.repos_dir).expanduser()
        if self.workers < 1:
            raise BatchError("--workers must be at least 1")
        if self.max_steps < 1:
            raise BatchError("--max-steps must be at least 1")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise BatchError("--max-new-tokens must be at least 1")
        if not self.repos_dir.is_dir():
            raise BatchError(f"--repos-dir {str(self.repos_dir)!r} is not a directory")
        if self.output.exists() and not self.output.is_file():
            raise BatchError(f"--output {str(self.output)!r} is not a file")
        if self.output.suffix == ".json" and self.output.name.endswith(".report.json"):
            raise BatchError("--output must not be a report file")
        self.model_name = self.model_name or f"clover/{self.model}"


def safe_name(instance_id: str) -> str:
    """A file-name-safe form of an instance id (kept readable)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id).strip("._") or "instance"
    if name != instance_id:
        name += "-" + hashlib.sha1(instance_id.encode()).hexdigest()[:6]
    return name


def _patch_lines(patch: str) -> int:
    return sum(1 for ln in patch.splitlines()
               if ln[:1] in "+-" and not ln.startswith(("+++ ", "--- ")))


@dataclass
class _Batch:
    opts: BatchOptions
    provider: BackendProvider
    preds: PredictionsFile
    report: BatchReport
    progress: Progress
    workdir: Path
    traj_dir: Path
    task_template: str
    eval_opts: EvalOptions | None = None
    running_agents: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)  # set on Ctrl-C

    def cancel_all(self) -> None:
        """Stop taking instances and cancel every running agent (which stops its tools)."""
        self.stopping.set()
        with self.lock:
            agents = list(self.running_agents)
        for agent in agents:
            agent.cancel()


def _save_trajectory(batch: _Batch, inst: Instance, agent, trace: list[str]) -> str | None:
    batch.traj_dir.mkdir(parents=True, exist_ok=True)
    name = safe_name(inst.instance_id)
    from clover_cli.agent.redact import scrub  # the API key never reaches a file (docs/security.md)
    (batch.traj_dir / f"{name}.log").write_text(scrub("\n".join(trace) + "\n"), encoding="utf-8")
    src = getattr(agent, "session_path", None) if agent is not None else None
    if src and Path(src).is_file():
        dest = batch.traj_dir / f"{name}.jsonl"
        shutil.copyfile(src, dest)
        return str(dest)
    return str(batch.traj_dir / f"{name}.log")


class _ListLog:
    """A write()-able sink that keeps lines (the per-instance trace)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.extend(ln for ln in text.splitlines() if ln)

    def flush(self) -> None:
        pass


def _run_agent(batch: _Batch, inst: Instance, tree: Path, trace: _ListLog) -> tuple[dict, object]:
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.prompt_files import render

    backend = batch.provider.get()
    agent = None
    try:
        extra = {"max_new_tokens": batch.opts.max_new_tokens} if batch.opts.max_new_tokens else {}
        cfg = AgentConfig(root=tree, approval="yolo", max_steps=batch.opts.max_steps, **extra,
                          meta={"mode": "swebench", "instance_id": inst.instance_id,
                                "repo": inst.repo, "base_commit": inst.base_commit})
        agent = Agent(backend, cfg)
        with batch.lock:
            batch.running_agents.add(agent)
        if batch.stopping.is_set():  # interrupted while this agent was being made
            agent.cancel()
        task = render(batch.task_template, repo=inst.repo, instance_id=inst.instance_id,
                      problem_statement=inst.problem_statement)
        record = drive_turn(agent, task, log=trace)
    finally:
        with batch.lock:
            batch.running_agents.discard(agent)
        batch.provider.release(backend)
    entry = {"reason": record.reason, "tool_calls": record.tool_calls}
    if batch.stopping.is_set() or record.reason == "cancelled":
        entry["error"] = "interrupted (no prediction written)"
    elif record.reason == "error":
        entry["error"] = "agent failed: " + ("; ".join(record.errors) or "unknown error")
    elif record.errors:
        entry["agent_errors"] = record.errors[-3:]
    if record.stats:
        entry["stats"] = record.stats
    return entry, agent


def eval_options(opts: BatchOptions, progress_stream: TextIO | None = None) -> EvalOptions:
    """The local-evaluation settings of a batch (logs beside the report)."""
    from clover_cli.modes.swebench.report import eval_logs_dir

    return EvalOptions(test_cmd=opts.test_cmd, timeout=opts.test_timeout, python=opts.python,
                       env_dir=opts.env_dir, keep=opts.keep_worktrees,
                       log_dir=eval_logs_dir(opts.output), progress=progress_stream)


def _evaluate(batch: _Batch, inst: Instance, clone: Path, patch: str) -> dict:
    previous = batch.report.previous.get(inst.instance_id, {}).get("evaluation")
    dest = batch.workdir / (safe_name(inst.instance_id) + ".eval")
    return cached_evaluation(previous, clone, inst, patch, dest, batch.eval_opts, batch.opts.redo)


def process_instance(batch: _Batch, inst: Instance) -> dict:
    """Run (or skip) one instance and record it; never raises for an instance-level failure."""
    start = time.monotonic()
    opts = batch.opts
    existing = None if opts.redo else batch.preds.get(inst.instance_id)
    entry: dict = {"repo": inst.repo, "base_commit": inst.base_commit}
    tree = batch.workdir / safe_name(inst.instance_id)
    clone = None
    try:
        if existing is not None:
            patch = existing["model_patch"]
            entry.update(status="skipped", patch_lines=_patch_lines(patch))
            old = batch.report.previous.get(inst.instance_id, {})
            for key in ("reason", "trajectory", "tool_calls"):
                if key in old:
                    entry[key] = old[key]
        else:
            clone = find_clone(opts.repos_dir, inst.repo_folder)
            add_worktree(clone, inst.base_commit, tree)
            trace = _ListLog()
            agent = None
            try:
                run_entry, agent = _run_agent(batch, inst, tree, trace)
                entry.update(run_entry)
                if "error" not in entry:
                    patch = diff_worktree(tree, inst.base_commit)
                    batch.preds.put(inst.instance_id, opts.model_name, patch)
                    entry.update(status="done", patch_lines=_patch_lines(patch))
            finally:
                entry["trajectory"] = _save_trajectory(batch, inst, agent, trace.lines)
                if not opts.keep_worktrees:
                    remove_worktree(clone, tree)
            if "error" in entry:
                entry["status"] = "error"
        if opts.evaluate == "local" and entry.get("status") in ("done", "skipped"):
            try:
                clone = clone or find_clone(opts.repos_dir, inst.repo_folder)
                entry["evaluation"] = _evaluate(batch, inst, clone, patch)
            except Exception as exc:  # the prediction stands; only its evaluation failed
                why = str(exc) if isinstance(exc, WorktreeError) else f"{type(exc).__name__}: {exc}"
                entry["evaluation"] = {"verdict": "error", "resolved": False, "reason": why,
                                       "error": why}
    except WorktreeError as exc:
        entry.update(status="error", error=str(exc))
    except Exception as exc:  # anything else from one instance: reported, the batch goes on
        entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
        if clone is not None and not opts.keep_worktrees:
            remove_worktree(clone, tree)
    entry["seconds"] = round(time.monotonic() - start, 2)
    batch.report.set(inst.instance_id, entry)
    return entry


def parse_ids(ids: tuple[str, ...]) -> list[str]:
    """`--instance-ids` values (repeated and/or comma-separated) as one ordered list."""
    return list(dict.fromkeys(i.strip() for raw in ids for i in raw.split(",") if i.strip()))


def _select(instances: list[Instance], wanted: list[str]) -> tuple[list[Instance], list[str]]:
    if not wanted:
        return instances, []
    by_id = {inst.instance_id: inst for inst in instances}
    return [by_id[i] for i in wanted if i in by_id], [i for i in wanted if i not in by_id]


def _run_workers(batch: _Batch, work, items: list, workers: int, grace: float = 5.0) -> None:
    """Run `work(item)` for every item on `workers` daemon threads.

    On Ctrl-C every running agent is cancelled (their tools are stopped), no new item starts,
    the workers get up to `grace` seconds to record their instance, and KeyboardInterrupt is
    re-raised. Daemon threads (not a ThreadPoolExecutor, whose exit handler joins its workers)
    so that a tool that ignores cancellation cannot hold the process.
    """
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        todo.put(item)
    failures: list[BaseException] = []
    count = min(workers, len(items))
    finished = threading.Semaphore(0)  # one release per worker that has ended

    def loop() -> None:
        try:
            while not batch.stopping.is_set():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                work(item)
        except Exception as exc:  # a bug outside process_instance's own handling
            failures.append(exc)
            batch.stopping.set()
        finally:
            finished.release()

    for i in range(count):
        threading.Thread(target=loop, name=f"clover-swebench-{i}", daemon=True).start()
    waiting = count  # Semaphore waits, not Thread.join: an interrupted join may not wait again
    try:
        while waiting:
            if finished.acquire(timeout=0.2):
                waiting -= 1
    except KeyboardInterrupt:
        batch.cancel_all()
        deadline = time.monotonic() + grace
        while waiting and finished.acquire(timeout=max(0.0, deadline - time.monotonic())):
            waiting -= 1
        raise
    if failures:
        raise failures[0]


def run_batch(opts: BatchOptions, factory, in_process: bool, *,
              progress_stream: TextIO | None = None, preloaded=None) -> BatchReport:
    """Run the whole batch; BatchError for bad input that stops it before it starts.

    `factory(spec)` makes a backend; `preloaded`: an in-process backend already loaded (shared by
    all workers under a lock).
    """
    from clover_cli.modes.swebench.instances import InstanceFileError, load_any

    try:
        instances, bad = load_any(opts.instances, opts.dataset, opts.split)
    except InstanceFileError as exc:
        raise BatchError(str(exc)) from None
    wanted = parse_ids(opts.instance_ids)
    selected, unknown = _select(instances, wanted)
    try:
        preds = PredictionsFile(opts.output)
        preds.flush()
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"cannot use --output {str(opts.output)!r}: {exc}") from None
    report = BatchReport(report_path(opts.output), {
        "model_name_or_path": opts.model_name, "instances_file": str(opts.instances or opts.dataset),
        "predictions": str(opts.output), "evaluate": opts.evaluate,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    for err in bad:
        if not wanted or err.instance_id in wanted:
            report.set(err.key(), {"status": "error", "error": f"{err.where}: {err.message}"})
    for missing in unknown:
        report.set(missing, {"status": "error", "error": "instance id not in the instances file"})
    report.write()

    own_workdir = opts.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="clover-swebench-")) if own_workdir else Path(opts.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    workdir = workdir.resolve()
    progress = Progress(len(selected) + len(report.instances), stream=progress_stream)
    for key in report.instances:
        progress.finish("error", f"error {key}", was_running=False)
    batch = _Batch(opts, BackendProvider(opts.model, factory, in_process, preloaded), preds, report,
                   progress, workdir, trajectories_dir(opts.output), "swebench_task.md",
                   eval_options(opts, progress_stream))

    def work(inst: Instance) -> dict:
        progress.start(f"start {inst.instance_id}")
        entry = process_instance(batch, inst)
        progress.finish(entry.get("status", "error"), f"{entry.get('status')} {inst.instance_id}")
        return entry

    try:
        _run_workers(batch, work, selected, opts.workers)
    finally:
        progress.close()
        batch.provider.close()
        report.write()
        if own_workdir and not opts.keep_worktrees:
            shutil.rmtree(workdir, ignore_errors=True)
    return report
