"""Pure pieces of the TUI: slash commands, markup filter, status line, denoise text, config."""
from __future__ import annotations

from pathlib import Path

import pytest

from clover_cli.config import CloverConfig, ConfigError, load_config
from clover_cli.trust import TrustStore
from clover_cli.tui import slash
from clover_cli.tui.textfilter import visible_controls
from clover_cli.tui.widgets.denoise import render_block
from clover_cli.tui.widgets.status_bar import StatusInfo, short_model_name
from clover_cli.tui.widgets.tool_panel import looks_like_diff, summarize_args


def test_slash_parse_and_prefixes():
    assert slash.parse("/threshold 0.9") == slash.SlashCommand("threshold", "0.9")
    assert slash.parse("  /HELP ") == slash.SlashCommand("help", "")
    assert slash.parse("/und") == slash.SlashCommand("undo", "")  # unique prefix
    with pytest.raises(slash.SlashError, match="ambiguous"):
        slash.parse("/c")  # clear, compact, copy
    with pytest.raises(slash.SlashError, match="Unknown command /frobnicate"):
        slash.parse("/frobnicate")
    assert slash.is_slash("/help") and not slash.is_slash("fix /etc/hosts") and not slash.is_slash("/a\nb")


def test_slash_completion_and_threshold():
    assert slash.complete("/c") == ["/clear", "/compact", "/copy"]
    assert slash.complete("/") == ["/" + n for n in slash.COMMANDS]
    assert slash.complete("/help me") == [] and slash.complete("help") == []
    assert slash.parse_threshold("0.8") == 0.8
    for bad in ("0", "1.5", "x"):
        with pytest.raises(slash.SlashError):
            slash.parse_threshold(bad)


def test_control_characters_are_drawn_as_pictures():
    assert visible_controls("a\x19b\tc\n\x7f") == "a␙b\tc\n␡"


def test_status_line_and_model_names():
    info = StatusInfo(model="replay:/tmp/x/script.json", block_size=32, threshold=0.9, tpf=2.345,
                      tokens_per_second=41.0, context_used=1234, context_window=4096, approval="auto-edit",
                      branch="main")
    assert info.text() == ("replay:script.json · block 32 · thr 0.9 · TPF 2.35 · 41.0 tok/s · ctx 1.2k/4.1k"
                           " · auto-edit · ⎇ main")
    assert StatusInfo(model="smollm2", block_size=1, threshold=0.95).text() == "smollm2 · AR · ask"
    assert short_model_name("/ckpt/dir/tiny-random") == "tiny-random"
    assert short_model_name("openai:http://h:1/v1#m") == "openai:http://h:1/v1#m"


def test_denoise_block_text_and_arg_summaries():
    assert render_block(("def", " f", "", "", ":"), (False, False, True, True, False)) == "def f░░:"
    assert summarize_args("run_shell", {"command": "pytest -q", "timeout": 30}) == "pytest -q timeout=30"
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert summarize_args("apply_patch", {"patch": patch}) == "x.py"
    assert looks_like_diff(patch) and not looks_like_diff("ls -la")
    assert summarize_args("grep", {"pattern": "x" * 100}, width=20).endswith("…")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_config_merges_user_project_and_options(tmp_path: Path):
    root = tmp_path / "proj"
    _write(tmp_path / "xdg" / "clover" / "config.toml", 'model = "smollm2"\nthreshold = 0.9\napproval = "yolo"\n')
    _write(root / ".clover" / "config.toml", 'approval = "auto-edit"\nthreshold = 0.8\n')
    assert load_config(root) == CloverConfig(model="smollm2", approval="yolo", threshold=0.9)  # untrusted
    TrustStore().set(root, True)
    assert load_config(root) == CloverConfig(model="smollm2", approval="auto-edit", threshold=0.8)
    assert load_config(root, model="tiny", approval=None).model == "tiny"
    assert load_config(tmp_path / "nowhere") == CloverConfig(model="smollm2", approval="yolo", threshold=0.9)


def test_config_errors_name_the_file(tmp_path: Path):
    root = tmp_path / "proj"
    bad = root / ".clover" / "config.toml"
    _write(bad, "threshold = = 1")
    TrustStore().set(root, True)
    with pytest.raises(ConfigError, match="config.toml: not valid TOML"):
        load_config(root)
    _write(bad, "threshold = 1.5")
    with pytest.raises(ConfigError, match=r"proj/\.clover/config\.toml: threshold must be in \(0, 1\]"):
        load_config(root)
    _write(bad, 'modle = "tiny"')
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(root)
    with pytest.raises(ConfigError, match="approval must be one of"):
        load_config(tmp_path, approval="sometimes")
    # clover fix's test command lives in the same file (docs/modes.md) and is checked too
    _write(bad, 'test_cmd = "tox -e py311 -- {test}"\n')
    assert load_config(root).test_cmd == "tox -e py311 -- {test}"
    _write(bad, 'test_cmd = ""\n')
    with pytest.raises(ConfigError, match="test_cmd must be a non-empty string"):
        load_config(root)


def test_markdown_split_keeps_open_blocks_in_the_tail():
    from clover_cli.tui.widgets.markdown_stream import split_finished

    assert split_finished("para one\n\npara two\n") == ("para one\n\n", "para two\n")
    assert split_finished("para one\n\npara two") == ("", "para one\n\npara two")  # line unfinished
    fenced = "intro\n\n```py\nx = 1\n\nnot a cut\n```\n\nafter\n"
    assert split_finished(fenced) == ("intro\n\n```py\nx = 1\n\nnot a cut\n```\n\n", "after\n")
    assert split_finished("intro\n\n```py\nx = 1\n\ny\n") == ("intro\n\n", "```py\nx = 1\n\ny\n")
    lists = "1. a\n\n2. b\n\n- c\n\n  indented continuation\n\nend\n"
    assert split_finished(lists) == ("1. a\n\n2. b\n\n- c\n\n  indented continuation\n\n", "end\n")
