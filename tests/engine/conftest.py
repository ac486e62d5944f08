"""`clover ARGS` from the engine tests: in-process by default (click's CliRunner: the command's
logic without a fresh interpreter and its torch import per call), in a real interpreter where the
point is the process itself (stray output on the real stderr, a crash, code run at import time);
those cases are marked slow."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str


def _in_process(args: list[str]) -> Ran:
    from click.testing import CliRunner
    from transformers.utils import logging as hf_logging

    from clover_cli.cli import cli

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    try:
        # stdin is empty, as a closed one: a prompt (input()) reads EOF, and its text lands on stdout
        result = CliRunner().invoke(cli, args, prog_name="clover")
    finally:  # generate quiets transformers for the process; give the other tests theirs back
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback, not an exit code of 1
    return Ran(result.exit_code, result.stdout, result.stderr)


def _real_process(args: list[str], timeout: int) -> Ran:
    out = subprocess.run([sys.executable, "-m", "clover_cli.cli", *args], capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL)
    return Ran(out.returncode, out.stdout, out.stderr)


@pytest.fixture
def clover():
    """clover(*args) -> Ran, in-process; clover(*args, real_process=True) in `python -m clover_cli.cli`
    (stdin closed, the environment the autouse fixtures set)."""

    def run(*args: str, real_process: bool = False, timeout: int = 300) -> Ran:
        return _real_process(list(args), timeout) if real_process else _in_process(list(args))

    return run


@pytest.fixture(params=[False, pytest.param(True, marks=pytest.mark.slow)], ids=["in_process", "real_process"])
def real_process(request) -> bool:
    """A test that takes this runs in-process, and again (slow) in a real interpreter."""
    return request.param
