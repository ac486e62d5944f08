"""Environments per repo+version, the verdict cache, `clover swebench evaluate`, --evaluate docker."""
from __future__ import annotations

import io
import json
import sys

import pytest

import swe_cases as sc
from modes_helpers import clover_in_process
from clover_cli.modes.swebench.environments import EnvError, ensure_env, env_key
from clover_cli.modes.swebench.batch_eval import cached_evaluation, docker_command
from clover_cli.modes.swebench.evaluate import EvalOptions, evaluate_prediction
from clover_cli.modes.swebench.specs import EvalSpec, spec_for


def _pipless(real_run):
    """_Builder.run making the virtual environment without pip (seconds less): the builder's
    own choice of interpreter, folder and log is unchanged."""
    def run(self, argv, cwd=None, timeout=3600):
        if argv[1:3] == ["-m", "venv"]:
            argv = [*argv[:3], "--without-pip", *argv[3:]]
        elif argv[1:2] == ["venv"]:
            argv = [a for a in argv if a != "--seed"]
        return real_run(self, argv, cwd, timeout)
    return run


def test_environment_is_built_once_per_repo_and_version_and_one_without_pytest_is_an_error(
        tmp_path, monkeypatch):
    from clover_cli.modes.swebench import environments as envs

    monkeypatch.setattr(envs._Builder, "run", _pipless(envs._Builder.run))
    _built_once_and_no_pytest_is_an_error(tmp_path)


@pytest.mark.slow
def test_a_real_environment_with_pip_is_built_once_and_one_without_pytest_is_an_error(tmp_path):
    _built_once_and_no_pytest_is_an_error(tmp_path)


def _built_once_and_no_pytest_is_an_error(tmp_path):
    clone = tmp_path / "pallets__flask"
    base = sc.make_repo(clone)
    inst = sc.instance(base, clone, version="0.0-test")       # no official spec: the built-in one
    builtin = spec_for(inst)
    assert builtin.source == "builtin" and builtin.python == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert builtin.pip_packages == ("pytest",)
    no_pytest = EvalSpec(python=builtin.python)               # the same, minus pytest: no network here
    with pytest.raises(EnvError, match="failed verification: it has no pytest"):
        ensure_env(no_pytest, inst.repo, inst.version, clone, base, tmp_path / "envs", io.StringIO())
    # a runner that is not pytest needs none: the environment verifies and is recorded
    spec = EvalSpec(python=builtin.python, test_cmd="./tests/runtests.py")
    log = io.StringIO()
    env = ensure_env(spec, inst.repo, inst.version, clone, base, tmp_path / "envs", log)
    assert env.root.name == env_key(inst.repo, inst.version, spec) and env.python.is_file()
    assert "creating a virtual environment" in log.getvalue() and "ready" in log.getvalue()
    assert not env.has_module("pytest")                       # a fresh venv: nothing installed
    again = io.StringIO()
    assert ensure_env(spec, inst.repo, inst.version, clone, base, tmp_path / "envs", again).python == env.python
    assert again.getvalue() == ""                             # reused, not rebuilt
    assert env_key(inst.repo, "other", spec) != env.root.name
    ev = evaluate_prediction(clone, inst, sc.gold_patch(clone), tmp_path / "w",
                             EvalOptions(env_dir=tmp_path / "envs"), env_info=(spec, env, "pytest -rA"))
    assert ev["verdict"] == "error" and "has no pytest" in ev["error"], ev


def test_verdict_cache_is_keyed_by_patch_environment_and_command(tmp_path, monkeypatch):
    from clover_cli.modes.swebench import batch_eval as evalbatch

    clone = tmp_path / "pallets__flask"
    base = sc.make_repo(clone)
    inst = sc.instance(base, clone)
    opts = EvalOptions(python=sys.executable, log_dir=tmp_path / "logs")
    gold = sc.gold_patch(clone)
    first = cached_evaluation(None, clone, inst, gold, tmp_path / "w", opts)
    assert first["verdict"] == "resolved" and "cached" not in first and first["cache_key"]
    # past the one real run, a recording stand-in evaluates: the cache's decisions are the point
    ran = []
    monkeypatch.setattr(evalbatch, "evaluate_prediction",
                        lambda *a, **k: ran.append(a[2]) or {"verdict": "unresolved"})
    same = cached_evaluation(first, clone, inst, gold, tmp_path / "w", opts)
    assert same["cached"] is True and same["cache_key"] == first["cache_key"] and ran == []
    other_cmd = EvalOptions(python=sys.executable, log_dir=tmp_path / "logs",
                            test_cmd="pytest -rA -p no:cacheprovider")
    fresh = cached_evaluation(first, clone, inst, gold, tmp_path / "w", other_cmd)
    assert "cached" not in fresh and fresh["cache_key"] != first["cache_key"] and ran == [gold]
    other_patch = cached_evaluation(first, clone, inst, sc.drifted_patch(), tmp_path / "w", opts)
    assert "cached" not in other_patch and other_patch["cache_key"] != first["cache_key"]
    assert ran == [gold, sc.drifted_patch()]
    redo = cached_evaluation(first, clone, inst, gold, tmp_path / "w", opts, redo=True)
    assert "cached" not in redo and redo["cache_key"] == first["cache_key"] and len(ran) == 3


def test_evaluate_only_over_an_existing_predictions_file(tmp_path, monkeypatch):
    repos = tmp_path / "repos"
    clone = repos / "pallets__flask"
    base = sc.make_repo(clone)
    inst = sc.instance(base, clone)
    rows = []
    for iid in ("pallets__flask-1", "pallets__flask-2", "pallets__flask-3"):
        rows.append({"instance_id": iid, "repo": inst.repo, "base_commit": base, "version": "2.3",
                     "problem_statement": "p", "test_patch": inst.test_patch,
                     "FAIL_TO_PASS": json.dumps(list(sc.F2P)), "PASS_TO_PASS": list(sc.P2P)})
    (tmp_path / "instances.json").write_text(json.dumps(rows))
    preds = tmp_path / "preds.jsonl"
    patches = {"pallets__flask-1": sc.gold_patch(clone), "pallets__flask-2": sc.skip_cheat_patch(clone),
               "pallets__flask-3": ""}
    preds.write_text("".join(json.dumps({"instance_id": k, "model_name_or_path": "m", "model_patch": v}) + "\n"
                             for k, v in patches.items()))
    monkeypatch.chdir(tmp_path)
    proc = clover_in_process("swebench", "evaluate", "--predictions", str(preds), "--instances",
                             str(tmp_path / "instances.json"), "--repos-dir", str(repos),
                             "--python", sys.executable)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "preds.report.json").read_text())
    verdicts = {k: v["evaluation"]["verdict"] for k, v in report["instances"].items()}
    assert verdicts == {"pallets__flask-1": "resolved", "pallets__flask-2": "unresolved",
                        "pallets__flask-3": "unresolved"}
    assert "empty patch" in report["instances"]["pallets__flask-3"]["evaluation"]["reason"]
    assert "resolved 1, unresolved 2, error 0 of 3; total time" in proc.stderr
    assert (tmp_path / "preds.eval-logs").is_dir()
    again = clover_in_process("swebench", "evaluate", "--predictions", str(preds), "--instances",
                              str(tmp_path / "instances.json"), "--repos-dir", str(repos),
                              "--python", sys.executable)
    report = json.loads((tmp_path / "preds.report.json").read_text())
    assert report["instances"]["pallets__flask-1"]["evaluation"]["cached"] is True, again.stderr


def test_docker_mode_says_clearly_what_is_missing(tmp_path, monkeypatch):
    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    (tmp_path / "i.jsonl").write_text("")
    (tmp_path / "empty-bin").mkdir()
    empty = str(tmp_path / "empty-bin")                                # no docker on PATH, surely
    monkeypatch.chdir(tmp_path)
    proc = clover_in_process("swebench", "evaluate", "--predictions", str(preds),
                             "--instances", str(tmp_path / "i.jsonl"), "--evaluate", "docker", path=empty)
    assert proc.returncode == 2 and "--evaluate docker needs" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "idle.json").write_text(json.dumps({"completions": ["Nothing."]}))
    gen = clover_in_process("swebench", "--instances", str(tmp_path / "i.jsonl"),
                            "--output", str(tmp_path / "out.jsonl"), "--model", f"replay:{tmp_path / 'idle.json'}",
                            "--evaluate", "docker", path=empty)
    assert gen.returncode == 2 and "--evaluate docker needs" in gen.stderr, gen.stderr
    assert not (tmp_path / "out.jsonl").exists()                       # refused before any agent ran
    argv = docker_command(preds, "princeton-nlp/SWE-bench_Verified", "r1", 2, ["a__b-1"])
    assert argv[1:3] == ["-m", "swebench.harness.run_evaluation"]
    assert argv[argv.index("--predictions_path") + 1] == str(preds)
    assert argv[-2:] == ["--instance_ids", "a__b-1"]


def test_spec_key_changes_with_what_goes_into_the_environment():
    a = EvalSpec(python="3.9", pip_packages=("pytest",))
    b = EvalSpec(python="3.9", pip_packages=("pytest", "numpy"))
    assert env_key("o/n", "1.0", a) != env_key("o/n", "1.0", b)
    assert env_key("o/n", "1.0", a) == env_key("o/n", "1.0", EvalSpec(python="3.9", pip_packages=("pytest",)))


def test_requirements_are_read_from_the_local_clone(tmp_path):
    from modes_helpers import git
    from clover_cli.modes.swebench.environments import _requirements

    clone = tmp_path / "o__n"
    sc.make_repo(clone)
    (clone / "requirements.txt").write_text("-r extra.txt\n-e .\n# a comment\npytest==8.0\n")
    (clone / "extra.txt").write_text("numpy\n.[test]\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "reqs")
    text = _requirements(clone, "o/n", git(clone, "rev-parse", "HEAD"))
    assert text.split() == ["numpy", "pytest==8.0"]
    assert _requirements(clone, "o/n", git(clone, "rev-parse", "HEAD~1")) is None
