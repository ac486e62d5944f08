"""`clover swebench`: instances in, preds.jsonl out (exit 0 all fine, 1 some errors, 2 bad input)."""
from __future__ import annotations

import sys

import click


def _fail(message: str) -> None:
    click.echo(f"clover swebench: error: {message}", err=True)
    sys.exit(2)


@click.command("swebench", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--instances", "instances", required=True, type=click.Path(dir_okay=False),
              help="SWE-bench instances: a JSON list or JSONL.")
@click.option("--output", "output", required=True, type=click.Path(dir_okay=False),
              help="Predictions JSONL to write (the official harness's input).")
@click.option("--model", "model", default=None, help="Model spec (default: the bundled tiny model).")
@click.option("--repos-dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Folder of local clones named owner__name (nothing is fetched).")
@click.option("--workdir", default=None, type=click.Path(file_okay=False),
              help="Where worktrees are made (default: a temporary folder).")
@click.option("--workers", default=1, show_default=True, type=int, help="Instances run in parallel.")
@click.option("--instance-ids", "instance_ids", multiple=True, metavar="ID[,ID...]",
              help="Only these instances (repeat or comma-separate).")
@click.option("--redo", is_flag=True, help="Run instances that already have a prediction again.")
@click.option("--evaluate", is_flag=True,
              help="Also run FAIL_TO_PASS / PASS_TO_PASS locally (a convenience, not the official harness).")
@click.option("--test-cmd", default=None, metavar="CMD",
              help="Evaluation test command with {tests} or {test} (default: python -m pytest -q -rA -p no:cacheprovider {tests}).")
@click.option("--max-steps", default=30, show_default=True, type=int, help="Tool steps per instance.")
@click.option("--max-new-tokens", default=None, type=int, help="Tokens per model call (default: the agent's).")
@click.option("--model-name", default=None, help="model_name_or_path in the predictions (default: clover/<model>).")
@click.option("--keep-worktrees", is_flag=True, help="Leave the worktrees in --workdir for inspection.")
@click.pass_context
def swebench(ctx: click.Context, instances, output, model, repos_dir, workdir, workers, instance_ids,
             redo, evaluate, test_cmd, max_steps, max_new_tokens, model_name, keep_worktrees) -> None:
    """Run the agent on SWE-bench-style instances and write predictions.

    Each instance gets a clean git worktree of <repos-dir>/owner__name at base_commit; the
    prediction is the worktree's diff against base_commit. Beside the output: OUTPUT-STEM.report.json
    (status per instance, totals, evaluation) and OUTPUT-STEM.trajectories/ (one session per instance).
    """
    from pathlib import Path

    from clover_cli.engine.spec import SpecError, parse_spec
    from clover_cli.modes.swebench import BatchError, BatchOptions, run_batch

    parent = ctx.parent.params if ctx.parent is not None else {}
    model = model or parent.get("model")
    try:
        spec = parse_spec(model)
        if model_name is None:
            short = Path(spec.value).name if spec.kind in ("dir", "replay") else str(spec)
            model_name = f"clover/{spec.kind}:{short}" if spec.kind == "replay" else f"clover/{short}"
        opts = BatchOptions(instances=Path(instances), output=Path(output), model=str(spec),
                            repos_dir=Path(repos_dir), workdir=Path(workdir) if workdir else None,
                            workers=workers, instance_ids=tuple(instance_ids), redo=redo,
                            evaluate=evaluate, max_steps=max_steps, test_cmd=test_cmd,
                            keep_worktrees=keep_worktrees, model_name=model_name,
                            max_new_tokens=max_new_tokens)
    except (SpecError, BatchError) as exc:
        _fail(str(exc))

    def factory(spec_text: str):
        from clover_cli.agent.backends import make_backend

        return make_backend(spec_text)

    preloaded = None
    if spec.in_process:
        try:  # load once up front: a model that cannot load is bad input, not N instance errors
            preloaded = factory(str(spec))
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
    sys.exit(1 if report.run_totals()["errors"] else 0)
