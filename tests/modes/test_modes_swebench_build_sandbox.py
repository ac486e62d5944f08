"""`clover swebench`'s environment build installs what the repository's requirements name, and
building a package runs its code: a requirement whose build backend reads the API key (and a
copy of it under another name), ~/.pgpass and ~/.ssh/id_rsa and writes into $HOME gets none of
them and leaves nothing there (clover_cli/modes/swebench/buildbox.py). Real git, real pip (no
index: PIP_NO_INDEX), real bubblewrap."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

import env_cases as ec
from modes_helpers import git, secret_home
from clover_cli.modes.swebench.environments import EnvError, ensure_env, env_key
from clover_cli.modes.swebench.specs import EvalSpec
from clover_cli.tools import sandbox

KEY = "sk-build-5c8e2f1a9d73"
BACKEND = '''
import json, os

def _leak():
    found = {"key": os.environ.get("OPENAI_API_KEY", "no-key"),
             "copy": os.environ.get("SPARE_KEY_COPY", "no-copy")}
    for name in ("~/.pgpass", "~/.ssh/id_rsa"):
        try:
            found[name] = open(os.path.expanduser(name)).read()
        except OSError:
            found[name] = "unreadable"
    try:
        open(os.path.expanduser("~/written-by-build"), "w").write("x")
        found["wrote"] = "yes"
    except OSError:
        found["wrote"] = "no"
    open(REPORT, "w").write(json.dumps(found))


_leak()


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("the hostile package does not build")
'''


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = secret_home(tmp_path, monkeypatch, KEY)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: the hostile package is a local folder
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.delenv("CLOVER_SANDBOX", raising=False)
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / "uv").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    return home


@pytest.mark.slow  # makes a real virtual environment with pip (~10 s)
@pytest.mark.skipif(not sandbox.status().available, reason=f"no bubblewrap: {sandbox.status().reason}")
def test_a_requirements_build_backend_gets_no_secret_and_cannot_write_home(tmp_path, home):
    spec = EvalSpec(python=ec.HERE, packages="requirements.txt")
    envs = tmp_path / "envs"
    report = envs / env_key("acme/toy", "1.0", spec) / "leak.json"  # the environment: writable
    clone = tmp_path / "acme__toy"
    hostile = clone / "hostile"
    hostile.mkdir(parents=True)
    (hostile / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "evil"\n'
                                            'backend-path = ["."]\n\n[project]\nname = "hostile"\nversion = "1"\n')
    (hostile / "evil.py").write_text(f"REPORT = {str(report)!r}\n" + BACKEND)
    (clone / "requirements.txt").write_text(f"file://{hostile}\n")
    git(clone, "init", "-q", "-b", "main")
    git(clone, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git(clone, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    commit = git(clone, "rev-parse", "HEAD")
    with pytest.raises(EnvError):  # the package does not build: the environment is not recorded
        ensure_env(spec, "acme/toy", "1.0", clone, commit, envs, io.StringIO())
    found = json.loads(report.read_text())  # its code did run, in the sandbox
    assert found == {"key": "no-key", "copy": "no-copy", "~/.pgpass": "unreadable",
                     "~/.ssh/id_rsa": "unreadable", "wrote": found["wrote"]}, found
    assert not (home / "written-by-build").exists()
