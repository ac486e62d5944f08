"""`clover train` command-line behaviour: clear errors for bad input, export round trip."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from clover_cli.commands.train_cmd import train


def test_bad_mix_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(train, ["--out", str(tmp_path / "r"), "--mix", "poems:1"])
    assert res.exit_code == 2 and "mix names must be among" in res.output
    assert not (tmp_path / "r").exists()


def test_export_missing_checkpoint_is_clear(tmp_path):
    res = CliRunner().invoke(train, ["--export", str(tmp_path / "nothing"), str(tmp_path / "d")])
    assert res.exit_code == 1 and "no checkpoint in" in res.output
    assert not (tmp_path / "d").exists()


def test_make_transcripts_needs_file():
    res = CliRunner().invoke(train, ["--make-transcripts", "3"])
    assert res.exit_code == 2 and "--transcripts FILE" in res.output


def test_command_module_imports_only_click():
    import subprocess
    import sys
    code = ("import sys; import clover_cli.commands.train_cmd; "
            "print(any(m in sys.modules for m in ('torch', 'transformers', 'tokenizers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_export_refuses_a_non_model_directory(tmp_path, bundled_dir):
    dest = tmp_path / "project"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    res = CliRunner().invoke(train, ["--export", str(bundled_dir), str(dest)])
    assert res.exit_code == 1 and "refusing to replace" in res.output
    assert (dest / "notes.txt").read_text() == "keep me"


def test_gpu_train_script_parses_and_uses_only_real_train_options():
    """scripts/gpu_train.sh runs only on a lent GPU: check here that bash parses it and that every
    option it passes to `clover train` exists (a renamed option would fail there, on the clock)."""
    import re
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_train.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    help_text = CliRunner().invoke(train, ["--help"]).output
    used = set(re.findall(r"(--[a-z][a-z-]+)", script.read_text().split("train() {")[1]))
    used -= {"--dry-run", "--fetch-wheels", "--query-gpu", "--format"}
    assert {"--steps", "--mix", "--export", "--max-minutes"} <= used
    missing = sorted(o for o in used if o not in help_text)
    assert not missing, missing


def test_from_tiny_trains_the_bundled_model_further(tmp_path, bundled_dir):
    """`clover train --from tiny` on a fresh machine continues the bundled model (its run
    directory is not shipped) and carries its training record."""
    import json

    out = tmp_path / "more"
    res = CliRunner().invoke(train, [
        "--from", "tiny", "--out", str(out), "--steps", "1", "--seq-len", "160",
        "--batch-size", "1", "--mix", "curriculum:1", "--real-names", "0", "--vocab-names", "0",
        "--no-eval", "--warmup", "1", "--log-every", "1"])
    assert res.exit_code == 0, res.output
    shipped = json.loads((bundled_dir / "train_state.json").read_text())
    state = json.loads((out / "train_state.json").read_text())
    assert state["config"]["from_dir"] == str(bundled_dir)
    shipped_steps = (shipped.get("totals") or {"steps": shipped["step"]})["steps"]
    assert state["base"]["steps"] == shipped_steps and state["totals"]["steps"] == shipped_steps + 1
    conf = json.loads((out / "model" / "config.json").read_text())
    assert conf["mask_token_id"] == json.loads((bundled_dir / "config.json").read_text())["mask_token_id"]


def test_size_presets_have_one_default_and_none_is_named_tiny(tmp_path, train_configs):
    """`tiny` names the bundled model; a size preset of that name would build another model.
    The CLI and TrainConfig share one default preset."""
    from click.testing import CliRunner

    from clover_cli.cli import cli
    from clover_cli.training.modeling import DEFAULT_SIZE, SIZES
    from clover_cli.training.trainer import TrainConfig

    assert "tiny" not in SIZES and DEFAULT_SIZE in SIZES
    assert TrainConfig(out=str(tmp_path / "a")).size == DEFAULT_SIZE
    with pytest.raises(ValueError, match="size must be one of"):
        TrainConfig(out=str(tmp_path / "b"), size="tiny")
    CliRunner().invoke(cli, ["train", "--out", str(tmp_path / "c")])
    assert [cfg.size for cfg in train_configs] == [DEFAULT_SIZE]


def _clover_without(module: str, *args: str):
    """`clover ARGS` in a fresh interpreter where `module` cannot be imported (as on an install
    without the `train` extra)."""
    import subprocess
    import sys
    code = (f"import sys; sys.modules[{module!r}] = None; sys.argv = ['clover', *{list(args)!r}]; "
            "from clover_cli.cli import main; main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_missing_trainer_dependency_is_one_line_naming_the_extra(tmp_path):
    out = _clover_without("torch", "train", "--out", str(tmp_path / "r"), "--steps", "1")
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == ["Error: clover train needs torch: pip install 'clover-cli[train]'"]
    assert not (tmp_path / "r").exists()


def test_test_run_transcripts_without_pytest_name_the_extra(tmp_path):
    out = _clover_without("pytest", "train", "--make-transcripts", "1", "--transcripts",
                          str(tmp_path / "t.jsonl"), "--tests-share", "1")
    assert out.returncode == 1, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "pytest" in line and "pip install 'clover-cli[train]'" in line and "--tests-share 0" in line
    assert not (tmp_path / "t.jsonl").exists()


def test_every_module_the_trainer_imports_comes_with_the_base_install_or_the_train_extra():
    """A third-party import added to clover_cli/training must be a base dependency or be listed in
    pyproject's `train` extra (pytest, which transcripts run, is there)."""
    import ast
    import re
    import sys
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]

    def names(reqs):
        return {re.split(r"[<>=!~ \[]", r)[0].replace("-", "_").lower() for r in reqs}
    base, extra = names(project["dependencies"]), names(project["optional-dependencies"]["train"])
    imported = set()
    for path in (root / "clover_cli" / "training").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"clover_cli", "__future__"}
    assert {"torch", "transformers", "tokenizers"} <= third_party
    assert third_party <= base | extra, third_party - base - extra
    assert extra == {"pytest"} and "pytest" not in base
