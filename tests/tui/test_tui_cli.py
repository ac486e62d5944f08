"""`clover chat` / plain `clover`: fast import, argument and config errors before any UI starts."""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from clover_cli.cli import cli
from clover_cli.trust import TrustStore


def test_chat_module_imports_no_heavy_packages():
    code = ("import sys, clover_cli.commands.chat_cmd, clover_cli.config; "
            "heavy = [m for m in ('textual', 'rich', 'torch', 'transformers') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_bad_config_and_arguments_fail_cleanly(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "proj"
    (root / ".clover").mkdir(parents=True)
    (root / ".clover" / "config.toml").write_text("approval = 'sometimes'\n")
    TrustStore().set(root, True)  # an untrusted repository's file is not even read
    runner = CliRunner()
    result = runner.invoke(cli, ["--root", str(root)])
    assert result.exit_code == 1
    assert "config.toml: approval must be one of ask, auto-edit, yolo, read-only" in result.output
    result = runner.invoke(cli, ["chat", "--root", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "is not a directory" in result.output
    result = runner.invoke(cli, ["chat", "--root", str(tmp_path), "--continue", "--session", "x"])
    assert result.exit_code == 2 and "either --continue or --session" in result.output
    help_text = runner.invoke(cli, ["chat", "--help"]).output
    for option in ("--model", "--root", "--approval", "--threshold", "--continue", "--session"):
        assert option in help_text
