"""A mistyped command gets click's "Did you mean" from the lazily imported command table."""
import pytest

from clover_cli.cli import COMMANDS
from in_process import clover


@pytest.mark.parametrize("typo,meant", [("fxi", "fix"), ("mdoels", "models"), ("udno", "undo"), ("rnu", "run")])
def test_a_typo_suggests_the_command(typo, meant):
    p = clover(typo)
    assert meant in COMMANDS and p.returncode == 2
    assert f"No such command '{typo}'. Did you mean '{meant}'?" in p.stderr and "Traceback" not in p.stderr


def test_nothing_close_suggests_nothing():
    p = clover("xyzzy")
    assert p.returncode == 2 and "No such command 'xyzzy'." in p.stderr and "Did you mean" not in p.stderr
