"""Fixtures for the one-shot mode tests."""
from __future__ import annotations

import pytest

from modes_helpers import make_calc_repo


@pytest.fixture
def calc_repo(tmp_path):
    """(path, base sha) of a repo whose add() subtracts, with a failing tests/test_add.py."""
    repo = tmp_path / "proj"
    sha = make_calc_repo(repo)
    return repo, sha


@pytest.fixture(autouse=True)
def _fast_child_pytest(monkeypatch):
    """Child pytest runs of the toy projects skip plugin autoloading (textual etc.): 3x faster."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
