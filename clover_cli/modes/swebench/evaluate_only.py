"""`clover swebench evaluate`: grade an existing predictions file, no agent run.

Each prediction whose instance is in --instances/--dataset is evaluated locally (evaluate.py)
or the whole file goes to the official docker harness. Verdicts go into the predictions' report
(`preds.report.json`, the same file a generation run writes; its other fields are kept) and a
table on stderr.
"""
from __future__ import annotations

import sys
import tempfile
import time
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from clover_cli.modes.swebench.batch_eval import EVAL_MODES, cached_evaluation, run_docker, summary_table
from clover_cli.modes.swebench.evaluate import EvalOptions
from clover_cli.modes.swebench.instances import InstanceFileError, load_any
from clover_cli.modes.swebench.predictions import PredictionsFile
from clover_cli.modes.swebench.report import BatchReport, eval_logs_dir, report_path
from clover_cli.modes.worktree import WorktreeError, find_clone


class EvalOnlyError(ValueError):
    """Bad input for the whole run (exit 2); one line for the user."""


@dataclass
class EvalOnlyOptions:
    predictions: Path
    instances: Path | None = None
    dataset: str | None = None
    split: str = "test"
    repos_dir: Path = Path(".")
    workdir: Path | None = None
    mode: str = "local"
    workers: int = 1
    instance_ids: tuple[str, ...] = ()
    redo: bool = False
    test_cmd: str | None = None
    python: str | None = None
    env_dir: Path | None = None
    timeout: float = 1800.0
    keep_worktrees: bool = False


def run_evaluate_only(opts: EvalOnlyOptions, stream: TextIO | None = None) -> BatchReport | int:
    """Evaluate every selected prediction; the report (local) or the harness's exit code (docker)."""
    from clover_cli.modes.swebench.run import parse_ids, safe_name

    out = stream if stream is not None else sys.stderr
    if opts.mode not in EVAL_MODES or opts.mode == "none":
        raise EvalOnlyError("evaluate needs --evaluate local or docker")
    if not Path(opts.predictions).is_file():
        raise EvalOnlyError(f"predictions file not found: {opts.predictions}")
    wanted = parse_ids(opts.instance_ids)
    if opts.mode == "docker":
        from clover_cli.modes.swebench.environments import EnvError

        dataset = opts.dataset or (str(opts.instances) if opts.instances else None)
        if not dataset:
            raise EvalOnlyError("give --instances FILE or --dataset NAME")
        try:
            return run_docker(Path(opts.predictions), dataset, opts.workers, wanted, opts.split, out)
        except EnvError as exc:
            raise EvalOnlyError(str(exc)) from None
    try:
        instances, _bad = load_any(opts.instances, opts.dataset, opts.split)
        preds = PredictionsFile(Path(opts.predictions))
    except InstanceFileError as exc:
        raise EvalOnlyError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalOnlyError(f"cannot read predictions {opts.predictions}: {exc}") from None
    by_id = {i.instance_id: i for i in instances}
    ids = [i for i in preds.ids() if not wanted or i in wanted]
    report = BatchReport(report_path(opts.predictions), {
        "predictions": str(opts.predictions), "evaluate": "local",
        "instances_file": str(opts.instances or opts.dataset),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    eopts = EvalOptions(test_cmd=opts.test_cmd, timeout=opts.timeout, python=opts.python,
                        env_dir=opts.env_dir, keep=opts.keep_worktrees,
                        log_dir=eval_logs_dir(opts.predictions), progress=out)
    own = opts.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="clover-eval-")) if own else Path(opts.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for missing in (i for i in wanted if i not in preds.ids()):
        report.set(missing, {"status": "error", "error": "no prediction for this instance"})

    def one(iid: str) -> None:
        old = dict(report.previous.get(iid, {}))
        entry = {k: v for k, v in old.items() if k != "evaluation"}
        entry.setdefault("status", "skipped")
        inst = by_id.get(iid)
        if inst is None:
            entry.update(evaluation={"verdict": "error", "resolved": False,
                                     "reason": "instance not in the instances file",
                                     "error": "instance not in the instances file"})
        else:
            out.write(f"evaluating {iid}\n")
            out.flush()
            try:
                clone = find_clone(opts.repos_dir, inst.repo_folder)
                entry["evaluation"] = cached_evaluation(
                    old.get("evaluation"), clone, inst, preds.get(iid)["model_patch"],
                    workdir.resolve() / (safe_name(iid) + ".eval"), eopts, opts.redo)
            except WorktreeError as exc:
                entry["evaluation"] = {"verdict": "error", "resolved": False, "reason": str(exc),
                                       "error": str(exc)}
        report.set(iid, entry)

    try:
        with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as pool:
            list(pool.map(one, ids))
    finally:
        report.write()
        if own and not opts.keep_worktrees:
            shutil.rmtree(workdir, ignore_errors=True)
    out.write(summary_table(report.instances, time.monotonic() - report.started) + "\n")
    out.flush()
    return report
