"""`clover generate` and `clover bench` take the shared --model (clover_cli/commands/options.py):
given to `clover` or to the subcommand, else the user's config `model`, else tiny. Before, both
declared their own --model defaulting to tiny, so `clover --model X generate` silently ran tiny."""
from __future__ import annotations

import json

from click.testing import CliRunner

from clover_cli.cli import cli


def _model_of(args: list[str]) -> str:
    out = CliRunner().invoke(cli, args, prog_name="clover")  # in-process: no second torch import
    assert out.exit_code == 0 and out.exception is None, (out.stderr, out.exception)
    return json.loads(out.stdout)["model"]


GENERATE = ["generate", "--prompt", "hi", "--max-new-tokens", "4", "--json"]


def test_generate_uses_the_groups_model(tiny_dirs):
    assert _model_of(["--model", str(tiny_dirs["clover"]), *GENERATE]) == "clover"


def test_generate_own_model_wins_and_still_works(tiny_dirs):
    assert _model_of(["--model", "tiny", *GENERATE, "--model", str(tiny_dirs["clover"])]) == "clover"


def test_generate_defaults_to_the_config_model_else_tiny(tiny_dirs, tmp_path, monkeypatch):
    assert _model_of(GENERATE) == "tiny"
    config = tmp_path / "xdg" / "clover" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"model = {json.dumps(str(tiny_dirs['clover']))}\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert _model_of(GENERATE) == "clover"


def test_bench_uses_the_groups_model(tiny_dirs, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"code": ["def f(x):\n"], "agent": []}))
    args = ["bench", "--prompts", str(prompts), "--thresholds", "0.5", "--max-new-tokens", "4", "--json"]
    assert _model_of(["--model", str(tiny_dirs["clover"]), *args]) == "clover"
