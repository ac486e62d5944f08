"""`clover fix TEST`: make a failing test pass (exit 0 passing, 1 still failing, 2 bad input)."""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import (cache_mb_option, command_line, max_steps_option, model_option,
                                         placement_options, request_timeout_of, request_timeout_option,
                                         root_option)
from clover_cli.termsafe import clean_line, clean_text, json_line


def _fail(message: str) -> None:
    click.echo(f"clover fix: error: {clean_line(message)}", err=True)
    sys.exit(2)


@click.command("fix", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("test")
@click.option("--test-cmd", default=None, metavar="CMD",
              help="Test command with a {test} placeholder (default: `test_cmd` in ~/.config/clover/config.toml or a trusted repository's .clover/config.toml, "
                   "else `python -m pytest -x -q -p no:cacheprovider -o addopts= {test}`, whose JUnit report must show the test "
                   "ran and passed; a custom command passes on exit code 0).")
@model_option("Model spec (default: `model` in your config or a trusted repository's .clover/config.toml, "
              "else the bundled tiny model).")
@root_option()
@cache_mb_option()
@placement_options()
@request_timeout_option()
@click.option("--attempts", default=3, show_default=True, type=int, help="Agent turns before giving up.")
@max_steps_option()
@click.option("--max-new-tokens", default=None, type=int, help="Tokens per model call (default: the agent's).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the outcome.")
@click.option("--allow-test-edits", is_flag=True, help="Let the agent change the test file(s), conftest.py and pytest config files.")
@click.pass_context
def fix(ctx: click.Context, test, test_cmd, attempts, max_steps, max_new_tokens, as_json,
        allow_test_edits) -> None:
    """Make the failing TEST pass; the test is re-run by clover itself after each agent turn.

    TEST is a test id (tests/test_x.py::test_y), a file, or an option expression such as
    "-k name" (put it after `--`). The whole fix is one checkpoint group: one `clover undo`
    restores every file the agent changed through its tools. The test file(s), conftest.py and
    pytest's config files cannot be changed unless --allow-test-edits. Ctrl-C stops the agent
    and its running command (exit 130).
    """
    from clover_cli.config import ConfigError, load_settings
    from clover_cli.engine.spec import SpecError, parse_spec
    from clover_cli.modes.fix.run import FixError, FixOptions, run_fix

    line = command_line(ctx)  # the group's options and these, merged (commands/options.py)
    model, root = line.model, line.root_path()
    if root.is_dir():
        try:  # the one settings loader: the user's file, and the repository's only when trusted
            settings = load_settings(root, dict(model=model, test_cmd=test_cmd, cache_mb=line.cache_mb,
                                                device=line.device, dtype=line.dtype,
                                                quantize=line.quantize),
                                     needed=("model", "test_cmd"))
        except ConfigError as exc:
            _fail(str(exc))
        for warning in settings.warnings:
            click.echo(f"clover fix: warning: {clean_line(warning)}", err=True)
        model, test_cmd = settings.config.model, settings.config.test_cmd
        line.cache_mb = settings.config.cache_mb
        line.device, line.dtype = settings.config.device, settings.config.dtype
        line.quantize = settings.config.quantize
    try:
        spec = parse_spec(model)
        opts = FixOptions(test=test, root=root, test_cmd=test_cmd, attempts=attempts,
                          max_steps=max_steps, allow_test_edits=allow_test_edits,
                          max_new_tokens=max_new_tokens)
    except (SpecError, FixError) as exc:
        _fail(str(exc))

    def make_backend():
        from clover_cli.agent.backends import make_backend as make

        # the typed spec parsed above: never turned back into a string
        placement = {k: v for k, v in (("device", line.device), ("dtype", line.dtype),
                                        ("quantize", line.quantize)) if v and v != "auto"}
        return make(spec, **({"cache_mb": line.cache_mb} if line.cache_mb is not None else {}), **placement,
                    **request_timeout_of(ctx))

    log = sys.stderr
    try:
        result = run_fix(opts, make_backend, log=log)
    except FixError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("clover fix: interrupted", err=True)
        sys.exit(130)

    if as_json:
        click.echo(json_line(result.as_dict()))  # lone surrogates: U+FFFD, never UnicodeEncodeError
    else:
        _print_human(result)
    sys.exit(0 if result.passed else 1)


def _print_human(result) -> None:
    command = " ".join(result.command)
    if result.status == "already_passing":
        click.echo(f"The test already passes: {command}")
        return
    if result.diff.strip():
        click.echo(clean_text(result.diff.rstrip("\n")))
    else:
        click.echo("(no changes)")
    if result.reverted_test_edits:
        click.echo("Reverted changes to the test file(s): " + ", ".join(result.reverted_test_edits))
    tail = [ln for ln in clean_text(result.test_output).rstrip().splitlines() if ln.strip()][-15:]
    click.echo("\n".join(tail))
    if result.unproven:
        click.echo(f"Not counted as passing: {result.unproven}.")
    if not result.passed:  # why each attempt ended, and where the test stands now
        for turn in result.turns:
            why = turn.get("reason", "?").replace("_", " ")
            click.echo(f"Attempt {turn.get('attempt')}: the turn ended ({why}) after "
                       f"{turn.get('tool_calls', 0)} tool call(s).")
            for error in turn.get("errors") or []:
                for ln in clean_text(error).splitlines():
                    click.echo(f"  {ln}")
        last = tail[-1] if tail else "(no output)"
        click.echo(f"The test still fails: {last}")
    verdict = "PASSED" if result.passed else "FAILED"
    click.echo(f"{verdict} after {result.attempts} attempt(s): {command}")
    if result.passed and result.changed_files:
        click.echo("Undo the whole fix with `clover undo` (one checkpoint group).")
