"""What an instance needs to be evaluated: Python version, install steps, test command.

With the `swebench` package (4.x, whose `MAP_REPO_VERSION_TO_SPECS` holds the per-repository,
per-version specs of the official harness) those come from the official spec. Without it (or for
a repository/version it does not list) a built-in default: the interpreter Clover runs on,
pytest and the repository itself installed into the environment, and `pytest -rA` - the official command for most
pytest repositories - with Django's and SymPy's own runners for those two.

The tests run are the WHOLE files the test_patch touches (the official "test directives"):
`diff --git a/X b/Y` paths minus data files; for Django, dotted module names under tests/.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from clover_cli.modes.swebench.instances import Instance

DEFAULT_TEST_CMD = "pytest -rA"
BUILTIN_TEST_CMDS = {  # the official runners for the two non-pytest repositories
    "django/django": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
    "sympy/sympy": "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
}
NON_TEST_SUFFIXES = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml",
                     ".yaml", ".toml")
_DIFF_PATH = re.compile(r"^diff --git a/.* b/(.*)$", re.M)
_PLUS_PATH = re.compile(r"^\+\+\+ b/(.*)$", re.M)
_MINUS_PATH = re.compile(r"^--- a/(.*)$", re.M)
# pre_install lines that set up a docker image's system (root, apt, conda) are skipped locally
SYSTEM_CMD = re.compile(r"^\s*(sudo\s+)?(apt|apt-get|conda|source|locale-gen|echo\s.*>\s*/etc)")


@dataclass(frozen=True)
class EvalSpec:
    """The evaluation recipe for one repository + version."""

    python: str = ""  # "3.9"; "" = the interpreter Clover runs on
    packages: str = ""  # "requirements.txt", "environment.yml" or a space-separated list
    pip_packages: tuple[str, ...] = ()
    pre_install: tuple[str, ...] = ()
    install: str = ""
    eval_commands: tuple[str, ...] = ()
    test_cmd: str = DEFAULT_TEST_CMD
    source: str = "builtin"  # "swebench" when taken from the official specs
    extra: dict = field(default_factory=dict, compare=False)

    def env_key_parts(self) -> list[str]:
        """What decides the environment's contents (its cache key)."""
        return [self.python, self.packages, " ".join(self.pip_packages),
                "\n".join(self.pre_install)]


def _listify(value) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (str(value),)


def official_spec(repo: str, version: str) -> dict | None:
    """The official spec dict for repo + version, or None (package missing or not listed)."""
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS  # swebench 4.x
    except Exception:
        return None
    spec = MAP_REPO_VERSION_TO_SPECS.get(repo, {}).get(version)
    return dict(spec) if isinstance(spec, dict) else None


def spec_for(instance: Instance, python: str | None = None) -> EvalSpec:
    """The recipe for an instance; `python` (a version like "3.11") overrides the spec's."""
    raw = official_spec(instance.repo, instance.version)
    if raw is None:
        cmd = BUILTIN_TEST_CMDS.get(instance.repo, DEFAULT_TEST_CMD)
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        return EvalSpec(python=python or here, test_cmd=cmd,
                        pip_packages=("pytest",) if is_pytest_cmd(cmd) else ())
    test_cmd = raw.get("test_cmd") or DEFAULT_TEST_CMD
    if isinstance(test_cmd, list):
        test_cmd = test_cmd[-1]
    return EvalSpec(python=python or str(raw.get("python") or ""),
                    packages=str(raw.get("packages") or ""),
                    pip_packages=_listify(raw.get("pip_packages")),
                    pre_install=_listify(raw.get("pre_install")),
                    install=str(raw.get("install") or ""),
                    eval_commands=_listify(raw.get("eval_commands")),
                    test_cmd=str(test_cmd), source="swebench", extra=raw)


def patch_files(patch: str) -> list[str]:
    """Every path a patch touches (old and new names), in order, without duplicates."""
    found = _DIFF_PATH.findall(patch) + _MINUS_PATH.findall(patch) + _PLUS_PATH.findall(patch)
    return list(dict.fromkeys(p.strip() for p in found if p.strip() and p.strip() != "/dev/null"))


def eval_test_files(instance: Instance) -> list[str]:
    """The test files (Django: modules) the test command is given: those the test_patch touches."""
    files = [p for p in dict.fromkeys(_DIFF_PATH.findall(instance.test_patch))
             if not p.endswith(NON_TEST_SUFFIXES)]
    if instance.repo != "django/django":
        return files
    out = []
    for path in files:
        path = path[:-3] if path.endswith(".py") else path
        path = path[len("tests/"):] if path.startswith("tests/") else path
        out.append(path.replace("/", "."))
    return out


def eval_test_command(spec: EvalSpec, instance: Instance, override: str | None = None) -> str:
    """The shell command that runs the instance's test files (`--test-cmd` may replace the
    runner: `{tests}` marks where the files go, else they are appended)."""
    base = override or spec.test_cmd
    files = " ".join(_quote(t) for t in eval_test_files(instance))
    if "{tests}" in base or "{test}" in base:
        return base.replace("{tests}", files).replace("{test}", files)
    return f"{base} {files}".strip()


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def is_pytest_cmd(cmd: str) -> bool:
    """Whether the test command runs pytest (then the interpreter must have pytest)."""
    return bool(re.search(r"(^|\s|/)(py\.test|pytest)(\s|$)", cmd))
