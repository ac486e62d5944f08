"""`clover swebench`: instances in, preds.jsonl out (exit 0 all fine, 1 some errors, 2 bad input);
`clover swebench evaluate`: grade an existing preds.jsonl."""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import (cache_mb_option, command_line, max_steps_option, model_option,
                                         placement_options, request_timeout_of, request_timeout_option)

EVAL_CHOICE = click.Choice(["local", "docker", "none"])


def _fail(message: str) -> None:
    click.echo(f"clover swebench: error: {message}", err=True)
    sys.exit(2)


def _eval_options(f):
    """Options shared by a generation run and `evaluate`."""
    opts = [
        click.option("--test-cmd", default=None, metavar="CMD",
                     help="Replace the spec's test runner (the test files go at {tests}, or at the end)."),
        click.option("--python", "python", default=None, metavar="PYTHON",
                     help="Run every instance's tests with this interpreter (no environments are built)."),
        click.option("--env-dir", default=None, type=click.Path(file_okay=False),
                     help="Where per repo+version environments are built and reused "
                          "(default: $XDG_CACHE_HOME/clover/swebench-envs)."),
        click.option("--test-timeout", default=1800.0, show_default=True, type=float,
                     help="Seconds for one instance's test run."),
        click.option("--dataset", default=None, metavar="NAME",
                     help="Load instances from a dataset (princeton-nlp/SWE-bench_Verified) through `datasets`."),
        click.option("--split", default="test", show_default=True, help="The --dataset split."),
        click.option("--repos-dir", default=".", show_default=True, type=click.Path(file_okay=False),
                     help="Folder of local clones named owner__name (nothing is fetched)."),
        click.option("--workdir", default=None, type=click.Path(file_okay=False),
                     help="Where worktrees are made (default: a temporary folder)."),
        click.option("--workers", default=1, show_default=True, type=int, help="Instances run in parallel."),
        click.option("--instance-ids", "instance_ids", multiple=True, metavar="ID[,ID...]",
                     help="Only these instances (repeat or comma-separate)."),
        click.option("--keep-worktrees", is_flag=True, help="Leave the worktrees in --workdir for inspection."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.group("swebench", invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--instances", "instances", default=None, type=click.Path(dir_okay=False),
              help="SWE-bench instances: parquet, a JSON list or JSONL (as published).")
@click.option("--output", "output", default=None, type=click.Path(dir_okay=False),
              help="Predictions JSONL to write (the official harness's input).")
@model_option()
@cache_mb_option()
@placement_options()
@request_timeout_option()
@click.option("--redo", is_flag=True, help="Run instances that already have a prediction again.")
@click.option("--evaluate", "evaluate", type=EVAL_CHOICE, default="none", is_flag=False,
              flag_value="local", show_default=True,
              help="After generating: grade locally (--evaluate alone = local), with the official docker harness, or not.")
@max_steps_option()
@click.option("--max-new-tokens", default=None, type=int, help="Tokens per model call (default: the agent's).")
@click.option("--model-name", default=None, help="model_name_or_path in the predictions (default: clover/<model>).")
@_eval_options
@click.pass_context
def swebench(ctx: click.Context, instances, output, redo, evaluate, max_steps, max_new_tokens,
             model_name, test_cmd, python, env_dir, test_timeout, dataset, split, repos_dir, workdir,
             workers, instance_ids, keep_worktrees) -> None:
    """Run the agent on SWE-bench-style instances and write predictions.

    Each instance gets a clean git worktree of <repos-dir>/owner__name at base_commit; the
    prediction is the worktree's diff against base_commit. Beside the output: OUTPUT-STEM.report.json
    (status per instance, totals, evaluation), OUTPUT-STEM.trajectories/ (one session per instance)
    and, with --evaluate local, OUTPUT-STEM.eval-logs/ (one test log per instance).
    """
    if ctx.invoked_subcommand is not None:
        return
    from pathlib import Path

    from clover_cli.engine.spec import SpecError, parse_spec
    from clover_cli.modes.swebench.run import BatchError, BatchOptions, run_batch

    if output is None:
        _fail("missing option --output (or use `clover swebench evaluate`)")
    if instances is None and dataset is None:
        _fail("give --instances FILE or --dataset NAME")
    model = command_line(ctx).model  # --model here or on `clover` (commands/options.py)
    try:
        spec = parse_spec(model)
        if model_name is None:
            short = Path(spec.value).name if spec.kind in ("dir", "replay") else str(spec)
            model_name = f"clover/{spec.kind}:{short}" if spec.kind == "replay" else f"clover/{short}"
        opts = BatchOptions(instances=Path(instances) if instances else None, output=Path(output),
                            model=str(spec), repos_dir=Path(repos_dir),
                            workdir=Path(workdir) if workdir else None,
                            workers=workers, instance_ids=tuple(instance_ids), redo=redo,
                            evaluate=evaluate, max_steps=max_steps, test_cmd=test_cmd,
                            keep_worktrees=keep_worktrees, model_name=model_name,
                            max_new_tokens=max_new_tokens, test_timeout=test_timeout,
                            python=python, env_dir=Path(env_dir) if env_dir else None,
                            dataset=dataset, split=split)
    except (SpecError, BatchError) as exc:
        _fail(str(exc))
    if evaluate == "docker":
        from clover_cli.modes.swebench.batch_eval import docker_problem

        problem = docker_problem()  # before the agent runs: no hours of work to then fail
        if problem:
            _fail(problem)

    def factory(_spec_text: str):
        from clover_cli.agent.backends import make_backend

        line = command_line(ctx)  # the spec parsed above, never re-parsed from its text
        placement = {k: v for k, v in (("device", line.device), ("dtype", line.dtype),
                                        ("quantize", line.quantize)) if v and v != "auto"}
        return make_backend(spec, **({"cache_mb": line.cache_mb} if line.cache_mb is not None else {}),
                            **placement, **request_timeout_of(ctx))

    preloaded = None
    if spec.in_process:
        try:  # load once up front: a model that cannot load is bad input, not N instance errors
            preloaded = factory(opts.model)
        except Exception as exc:
            _fail(f"cannot load model: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}")
    try:
        report = run_batch(opts, factory, spec.in_process, progress_stream=sys.stderr,
                           preloaded=preloaded)
    except BatchError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("clover swebench: interrupted; finished instances are in the output", err=True)
        sys.exit(130)
    click.echo(report.summary())
    click.echo(f"predictions: {opts.output}")
    click.echo(f"report: {report.path}")
    if evaluate == "local":
        from clover_cli.modes.swebench.batch_eval import summary_table

        click.echo(summary_table(report.instances, report.as_dict()["elapsed_s"]), err=True)
    code = 1 if report.run_totals()["errors"] else 0
    if evaluate == "docker":
        from clover_cli.modes.swebench.batch_eval import run_docker
        from clover_cli.modes.swebench.environments import EnvError
        from clover_cli.modes.swebench.run import parse_ids

        try:
            rc = run_docker(opts.output, dataset or str(opts.instances), workers,
                            parse_ids(tuple(instance_ids)), split)
        except EnvError as exc:
            _fail(str(exc))
        code = code or (1 if rc else 0)
    sys.exit(code)


@swebench.command("evaluate", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--predictions", required=True, type=click.Path(dir_okay=False),
              help="The predictions JSONL to grade.")
@click.option("--instances", "instances", default=None, type=click.Path(dir_okay=False),
              help="The instances the predictions are for: parquet, JSON or JSONL.")
@click.option("--evaluate", "mode", type=click.Choice(["local", "docker"]), default="local",
              show_default=True, help="Grade locally or with the official docker harness.")
@click.option("--redo", is_flag=True, help="Grade again even when a cached verdict still holds.")
@_eval_options
def evaluate_cmd(predictions, instances, mode, redo, test_cmd, python, env_dir, test_timeout,
                 dataset, split, repos_dir, workdir, workers, instance_ids, keep_worktrees) -> None:
    """Grade an existing predictions file (no agent run); verdicts go to PREDICTIONS-STEM.report.json."""
    from pathlib import Path

    from clover_cli.modes.swebench.evaluate_only import EvalOnlyError, EvalOnlyOptions, run_evaluate_only

    if instances is None and dataset is None:
        _fail("give --instances FILE or --dataset NAME")
    if workers < 1:
        _fail("--workers must be at least 1")
    opts = EvalOnlyOptions(predictions=Path(predictions), instances=Path(instances) if instances else None,
                           dataset=dataset, split=split, repos_dir=Path(repos_dir),
                           workdir=Path(workdir) if workdir else None, mode=mode, workers=workers,
                           instance_ids=tuple(instance_ids), redo=redo, test_cmd=test_cmd,
                           python=python, env_dir=Path(env_dir) if env_dir else None,
                           timeout=test_timeout, keep_worktrees=keep_worktrees)
    try:
        result = run_evaluate_only(opts, sys.stderr)
    except EvalOnlyError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("clover swebench evaluate: interrupted; finished verdicts are in the report", err=True)
        sys.exit(130)
    if isinstance(result, int):
        sys.exit(1 if result else 0)
    click.echo(f"report: {result.path}")
    t = result.run_totals()
    sys.exit(1 if t["eval_errors"] or t["errors"] else 0)
