""".clover/ hides Clover's state from git but leaves the project's config.toml committable."""
from __future__ import annotations

import subprocess

from clover_cli.tools.checkpoints import ensure_private_dir


def _status(repo) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


def test_state_is_hidden_and_config_is_not(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    private = ensure_private_dir(tmp_path)
    (private / "sessions").mkdir()
    (private / "sessions" / "s.jsonl").write_text("{}\n")
    (private / "approvals.json").write_text("{}")
    assert _status(tmp_path) == ""
    (private / "config.toml").write_text('test_cmd = "pytest {test}"\n')
    assert _status(tmp_path) == "?? .clover/config.toml\n"
