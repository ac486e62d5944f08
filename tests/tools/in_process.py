"""`clover ARGS` in-process for the tool tests' CLI checks: no interpreter (and torch) start per
call. Paths in ARGS must be absolute."""
from __future__ import annotations

import traceback
from types import SimpleNamespace


def clover(*args: str) -> SimpleNamespace:
    """(returncode, stdout, stderr) like a finished `clover` process; an exception escaping the
    command shows up in stderr as a traceback, as it would in a real process."""
    from click.testing import CliRunner

    from clover_cli.cli import cli

    result = CliRunner().invoke(cli, list(args), prog_name="clover")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception))
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=stderr)
