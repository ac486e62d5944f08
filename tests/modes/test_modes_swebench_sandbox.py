"""`clover swebench evaluate` runs the repository's and the model patch's code in the workspace
sandbox with the allow-listed environment, like `clover fix`'s tests: a patch whose code reads
the API key, ~/.pgpass and ~/.ssh/id_rsa and writes into $HOME gets none of them and leaves
nothing in $HOME, and the evaluation still grades. Real git, real pytest, real bubblewrap."""
from __future__ import annotations

import sys

import pytest

import swe_cases as sc
from modes_helpers import secret_home
from clover_cli.modes.swebench.evaluate import EvalOptions, evaluate_prediction
from clover_cli.tools import sandbox

KEY = "sk-eval-7d1e4a9c3b52"
LEAK = '''

def _leak():
    import os
    found = [os.environ.get("OPENAI_API_KEY", "no-key"), os.environ.get("SPARE_KEY_COPY", "no-copy")]
    for path in ("~/.pgpass", "~/.ssh/id_rsa"):
        try:
            found.append(open(os.path.expanduser(path)).read())
        except OSError:
            found.append("unreadable")
    try:
        open(os.path.expanduser("~/written-by-tests"), "w").write("x")
    except OSError:
        pass
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "leak.txt"), "w").write("|".join(found))


_leak()
'''


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = secret_home(tmp_path, monkeypatch, KEY)
    return home


@pytest.mark.skipif(not sandbox.status().available, reason=f"no bubblewrap: {sandbox.status().reason}")
def test_forced_python_evaluation_runs_the_patch_sandboxed_and_without_secrets(tmp_path, home, monkeypatch):
    monkeypatch.delenv("CLOVER_SANDBOX", raising=False)
    clone = tmp_path / "pallets__flask"
    base = sc.make_repo(clone)
    inst = sc.instance(base, clone)
    patch = sc.diff_of(clone, lambda p: (p / "calc.py").write_text(
        sc.CALC.replace("return a - b", "return a + b") + LEAK))
    dest = tmp_path / "evaluated"
    ev = evaluate_prediction(clone, inst, patch, dest, EvalOptions(python=sys.executable, keep=True,
                                                                   log_dir=tmp_path / "logs"))
    assert ev["verdict"] == "resolved", ev  # the sandbox does not stop an honest evaluation
    leaked = (dest / "leak.txt").read_text()
    assert leaked == "no-key|no-copy|unreadable|unreadable", leaked
    assert not (home / "written-by-tests").exists()
