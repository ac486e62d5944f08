"""--device / --dtype on every command that loads a model, the config keys and environment
variables behind them (flag > environment > user file > auto; never a repository's file), and the
placement shown in `generate --json`, `run --json`'s stats, `bench` and the status line."""
from __future__ import annotations

import json
import os

import pytest

from clover_cli.config import ConfigError, load_settings
from clover_cli.trust import TrustStore



def clover(*args):
    """`clover ARGS` in-process (click's CliRunner): returncode, stdout, stderr."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    from clover_cli.cli import cli

    result = CliRunner().invoke(cli, list(args), prog_name="clover")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def user_file(text: str):
    from pathlib import Path

    return write(Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml", text)

LOADING_COMMANDS = ("chat", "run", "fix", "swebench", "acp", "generate", "bench")


@pytest.mark.parametrize("command", LOADING_COMMANDS)
def test_every_loading_command_takes_device_and_dtype(command):
    done = clover(command, "--help")
    assert done.returncode == 0
    assert "--device" in done.stdout and "--dtype" in done.stdout


def test_precedence_flag_then_environment_then_user_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CLOVER_DEVICE", raising=False)
    monkeypatch.delenv("CLOVER_DTYPE", raising=False)
    assert load_settings(tmp_path).config.device == "auto"
    user_file('device = "cuda:1"\ndtype = "float16"\n')
    s = load_settings(tmp_path)
    assert (s.config.device, s.config.dtype, s.sources["device"]) == ("cuda:1", "float16", "user")
    monkeypatch.setenv("CLOVER_DEVICE", "cpu")
    s = load_settings(tmp_path)
    assert (s.config.device, s.config.dtype, s.sources["device"]) == ("cpu", "float16", "env")
    s = load_settings(tmp_path, {"device": "mps", "dtype": "bf16"})
    assert (s.config.device, s.config.dtype, s.sources["device"]) == ("mps", "bfloat16", "flag")


def test_a_repository_may_not_choose_the_device(tmp_path, monkeypatch):
    monkeypatch.delenv("CLOVER_DEVICE", raising=False)
    repo = tmp_path / "repo"
    write(repo / ".clover" / "config.toml", 'device = "cuda"\ndtype = "float16"\n')
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert (s.config.device, s.config.dtype) == ("auto", "auto")
    assert any("device ignored" in w for w in s.warnings) and any("dtype ignored" in w for w in s.warnings)


def test_bad_values_name_their_source(tmp_path, monkeypatch):
    user_file('device = "gpu"\n')
    with pytest.raises(ConfigError, match=r"config\.toml: device must be auto, cpu, cuda, cuda:N or mps"):
        load_settings(tmp_path)
    user_file("")
    monkeypatch.setenv("CLOVER_DTYPE", "int3")
    with pytest.raises(ConfigError, match=r"\$CLOVER_DTYPE: dtype must be one of"):
        load_settings(tmp_path)
    with pytest.raises(ConfigError, match=r"--dtype: dtype must be one of"):
        load_settings(tmp_path, {"dtype": "int3"})


@pytest.mark.parametrize("args", [("generate", "--prompt", "hi"), ("bench", "--max-new-tokens", "4"),
                                  ("run", "hi")])
def test_cuda_without_a_gpu_is_one_line_and_exit_2(args, tmp_path):
    extra = ("--root", str(tmp_path)) if args[0] == "run" else ()
    done = clover(*args, *extra, "--device", "cuda")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], done.stderr


def test_generate_json_names_the_placement_it_ran_on(monkeypatch):
    monkeypatch.setenv("CLOVER_DTYPE", "bfloat16")
    done = clover("generate", "--prompt", "def f():", "--raw", "--max-new-tokens", "4", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["device"], out["dtype"], out["weight_format"], out["device_name"]) == \
        ("cpu", "bfloat16", "bfloat16", "CPU")
    done = clover("--device", "cpu", "generate", "--prompt", "x", "--raw", "--max-new-tokens", "4")
    assert done.returncode == 0 and "on cpu · bfloat16" in done.stderr


def test_run_json_stats_name_the_placement(tmp_path):
    done = clover("run", "say hi", "--root", str(tmp_path), "--json", "--max-steps", "1",
                  "--max-new-tokens", "8", "--dtype", "bfloat16")
    end = [json.loads(line) for line in done.stdout.splitlines() if line.strip()][-1]
    assert end["type"] == "turn_end"
    assert (end["stats"]["device"], end["stats"]["dtype"]) == ("cpu", "bfloat16")


@pytest.mark.slow
def test_bench_reports_the_placement():
    done = clover("bench", "--max-new-tokens", "4", "--thresholds", "0.9", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["placement"]["device"] == "cpu" and report["placement"]["dtype"] == "float32"


def test_the_status_line_shows_the_placement():
    from clover_cli.tui.widgets.status_bar import StatusInfo

    info = StatusInfo(model="hf:JetAstra/SDAR-8B-Chat", block_size=32, placement="cuda:0 · bfloat16")
    assert "cuda:0 · bfloat16" in info.text()
    assert "cuda:0" not in StatusInfo(model="tiny", block_size=32).text()
