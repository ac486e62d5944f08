"""`clover ARGS` in-process through click's CliRunner, for every test folder's CLI checks: the
command's logic without an interpreter (and torch) start per call (docs/design.md, "Tests").
`tests/` is on sys.path in every test run (its conftest.py is a rootdir conftest), so test
modules import this as `from in_process import clover`."""
from __future__ import annotations

import traceback
from types import SimpleNamespace


def clover(*args: str, env: dict | None = None) -> SimpleNamespace:
    """(returncode, stdout, stderr) like a finished `clover` process, `env` set for the call
    (None values unset); an exception escaping the command shows up in stderr as a traceback, as
    it would in a real process. Paths in ARGS must be absolute."""
    from click.testing import CliRunner

    from clover_cli.cli import cli

    result = CliRunner().invoke(cli, list(args), prog_name="clover", env=env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception))
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=stderr)
