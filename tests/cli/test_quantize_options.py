"""--quantize on every command that loads a model, the `quantize` config key and CLOVER_QUANTIZE
behind it (flag > environment > user file > none; never a repository's file), and the format in
`generate --json` and `bench` (docs/engine.md, "Quantized weights")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clover_cli.config import ConfigError, load_settings
from clover_cli.trust import TrustStore
from tests.cli.test_placement_options import LOADING_COMMANDS, clover, write


def user_file(text: str):
    return write(Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml", text)


@pytest.mark.parametrize("command", LOADING_COMMANDS)
def test_every_loading_command_takes_quantize(command):
    done = clover(command, "--help")
    assert done.returncode == 0 and "--quantize" in done.stdout


def test_precedence_flag_then_environment_then_user_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CLOVER_QUANTIZE", raising=False)
    assert load_settings(tmp_path).config.quantize == "none"
    user_file('quantize = "int4"\n')
    s = load_settings(tmp_path)
    assert (s.config.quantize, s.sources["quantize"]) == ("int4", "user")
    monkeypatch.setenv("CLOVER_QUANTIZE", "int8")
    s = load_settings(tmp_path)
    assert (s.config.quantize, s.sources["quantize"]) == ("int8", "env")
    s = load_settings(tmp_path, {"quantize": "none"})
    assert (s.config.quantize, s.sources["quantize"]) == ("none", "flag")


def test_a_repository_may_not_choose_the_weight_format(tmp_path, monkeypatch):
    monkeypatch.delenv("CLOVER_QUANTIZE", raising=False)
    repo = tmp_path / "repo"
    write(repo / ".clover" / "config.toml", 'quantize = "int4"\n')
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert s.config.quantize == "none" and any("quantize ignored" in w for w in s.warnings)


def test_bad_values_name_their_source(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOVER_QUANTIZE", "int3")
    with pytest.raises(ConfigError, match=r"\$CLOVER_QUANTIZE: quantize must be int8, int4 or none"):
        load_settings(tmp_path)
    monkeypatch.delenv("CLOVER_QUANTIZE")
    with pytest.raises(ConfigError, match=r"--quantize: quantize must be"):
        load_settings(tmp_path, {"quantize": "fp4"})
    done = clover("generate", "--prompt", "hi", "--quantize", "gguf")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_a_flag_none_beats_the_environment(monkeypatch):
    monkeypatch.setenv("CLOVER_QUANTIZE", "int8")
    out = json.loads(clover("generate", "--prompt", "hi", "--raw", "--max-new-tokens", "2", "--json").stdout)
    assert out["weight_format"] == "int8"
    out = json.loads(clover("generate", "--prompt", "hi", "--raw", "--max-new-tokens", "2", "--json",
                            "--quantize", "none").stdout)
    assert out["weight_format"] == "float32"


def test_bench_reports_the_weight_format(tmp_path):
    prompts = write(tmp_path / "p.json", json.dumps({"code": ["def f():\n"]}))
    done = clover("bench", "--max-new-tokens", "4", "--quantize", "int4", "--json", "--prompts", str(prompts),
                  "--thresholds", "0.9")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["placement"]["weight_format"] == "int4"
