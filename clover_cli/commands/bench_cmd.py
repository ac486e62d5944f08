"""`clover bench`: TPF, speed and quality of block diffusion vs AR mode of the same weights;
`clover bench --session`: a recorded agent session replayed cold and with prefix reuse."""
from __future__ import annotations

import json
import sys

import click

from clover_cli.commands.options import model_option, placement_options
from clover_cli.engine.config import DEFAULT_THRESHOLD, check_threshold


def _thresholds(ctx, param, value: str) -> list[float]:
    try:
        values = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter("expected comma-separated numbers, e.g. 0.95,0.9") from None
    if not values:
        raise click.BadParameter("expected comma-separated numbers, e.g. 0.95,0.9")
    try:
        return [check_threshold(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("bench")
@model_option()
@click.option("--prompts", "prompts_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="JSON {\"code\": [...], \"agent\": [...]} (default: the built-in held-out set).")
@click.option("--thresholds", default=f"{DEFAULT_THRESHOLD},0.9,0.8,0.7", show_default=True, callback=_thresholds)
@click.option("--max-new-tokens", type=click.IntRange(1, 4096), default=64, show_default=True)
@click.option("--offline", is_flag=True, help="Never download an hf: model (as HF_HUB_OFFLINE=1).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Draw TPF and speedup against threshold to this PNG (needs matplotlib).")
@click.option("--session", "session_file", is_flag=False, flag_value="", default=None, metavar="[FIXTURE]",
              help="Replay a recorded agent session (default: the built-in 20 steps) cold and with "
                   "prefix reuse; per-step prefill, decode and memory.")
@click.option("--steps", type=click.IntRange(1, 1000), default=None,
              help="--session: steps to replay (default: the recording's; more cycle its tool turns).")
@click.option("--decode-tokens", type=click.IntRange(1, 4096), default=32, show_default=True,
              help="--session: tokens decoded at each step.")
@click.option("--check", is_flag=True, help="--session: exit 1 when a target fails.")
@placement_options()
def bench(prompts_file, thresholds, max_new_tokens, offline, as_json, plot_path,
          session_file, steps, decode_tokens, check) -> None:
    """Measure TPF, speed and quality: AR mode vs block diffusion, interleaved per prompt."""
    from clover_cli.commands.generate_cmd import model_choice

    model_spec = model_choice()
    if session_file is not None:
        _session(model_spec, session_file or None, steps, decode_tokens, check, offline, as_json)
        return
    if steps is not None or check:
        click.echo("clover: error: --steps and --check go with --session", err=True)
        sys.exit(2)
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            click.echo("clover: error: --plot needs matplotlib: pip install 'clover-cli[plot]'", err=True)
            sys.exit(2)
    from clover_cli.bench.speed import format_table, load_prompts, plot, run_bench
    from clover_cli.commands.generate_cmd import load_or_exit, parse_spec_or_exit

    spec = parse_spec_or_exit(model_spec)  # once, at the boundary

    try:
        prompts = load_prompts(prompts_file)
    except (ValueError, json.JSONDecodeError) as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)
    lm = load_or_exit(spec, offline=offline)

    def progress(msg: str) -> None:
        if not as_json:
            click.echo(f"\r{msg}  ", nl=False, err=True)

    report = run_bench(lm, prompts, thresholds, max_new_tokens, progress)
    report["placement"] = lm.placement.as_dict()  # device, dtype, weight format (docs/engine.md)
    if not as_json:
        click.echo("", err=True)
        click.echo(f"placement: {lm.placement.label()} ({lm.placement.device_name})")
    if plot_path is not None:
        plot(report, plot_path)
    click.echo(json.dumps(report) if as_json else format_table(report))


def _session(model_spec, fixture, steps, decode_tokens, check, offline, as_json) -> None:
    """`clover bench --session`: clover_cli/bench/session.py, printed."""
    from clover_cli.commands.generate_cmd import load_or_exit, parse_spec_or_exit
    from clover_cli.bench.session import load_session, replay
    from clover_cli.bench.session_report import format_report

    spec = parse_spec_or_exit(model_spec)  # once, at the boundary
    try:
        session = load_session(fixture)
    except (OSError, ValueError) as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)
    lm = load_or_exit(spec, offline=offline)
    if not lm.is_diffusion:
        click.echo("clover: error: --session replays a block-diffusion model", err=True)
        sys.exit(2)

    def progress(msg: str) -> None:
        if not as_json:
            click.echo(f"\r{msg}  ", nl=False, err=True)

    try:
        report = replay(lm, session, steps=steps, decode_tokens=decode_tokens, progress=progress)
    except ValueError as exc:
        click.echo(f"\nclover: error: {exc}", err=True)
        sys.exit(2)
    report["placement"] = lm.placement.as_dict()
    if not as_json:
        click.echo("", err=True)
        click.echo(f"placement: {lm.placement.label()} ({lm.placement.device_name})")
    click.echo(json.dumps(report) if as_json else format_report(report))
    if check and any(t["ok"] is False for t in report["targets"].values()):
        sys.exit(1)
