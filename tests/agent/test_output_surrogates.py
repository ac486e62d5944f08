"""Text that is not valid UTF-8 (lone surrogates, as a replay file or a server's `\\ud800` escape
gives) never ends a command with UnicodeEncodeError: every writer prints U+FFFD."""
from __future__ import annotations

import json

import pytest
from in_process import clover

from clover_cli.agent.history import PromptHistory
from clover_cli.agent.session import read_records, sessions_dir
from clover_cli import termsafe

from .helpers import call, make_repo, replay

LONE = "\ud800"


def _script(tmp_path):
    return replay(tmp_path, [f"bad {LONE} text " + call("read_file", path=f"a{LONE}.py"),
                             f"done \udc80 {LONE}"])


def test_run_json_mode_prints_u_fffd_for_lone_surrogates(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    p = clover("run", "task", "--model", _script(tmp_path), "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert lines[-1]["type"] == "turn_end" and lines[-1]["final_text"] == "done \ufffd \ufffd"
    blocks = "".join(x["text"] for x in lines if x["type"] == "block")
    assert blocks.startswith("bad \ufffd text ")
    p.stdout.encode("utf-8")  # the whole output is valid UTF-8
    assert [x["arguments"] for x in lines if x["type"] == "tool_call"] == [{"path": "a\ufffd.py"}]
    # the session file, written alongside, is valid UTF-8 JSON and reads back U+FFFD
    (path,) = sessions_dir(repo).glob("*.jsonl")
    path.read_bytes().decode("utf-8")
    assert any(r.get("final_text") == "done \ufffd \ufffd" for r in read_records(path, "turn_end"))


def test_run_text_mode_prints_u_fffd_for_lone_surrogates(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    p = clover("run", "task", "--model", _script(tmp_path), "--root", str(repo))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout.startswith("bad \ufffd text ") and "done \ufffd \ufffd" in p.stdout
    assert "> read_file" in p.stdout and "a\ufffd.py" in p.stdout


@pytest.mark.parametrize("writer", ["clean_text", "clean_line", "json_line", "utf8_safe", "stream"])
def test_every_output_helper_gives_encodable_text(writer):
    text = f"x{LONE}y\udfff"
    out = termsafe.StreamCleaner().feed(text) if writer == "stream" else getattr(termsafe, writer)(text)
    out.encode("utf-8")
    assert "\ufffd" in out


def test_prompt_history_stores_a_prompt_with_lone_surrogates(tmp_path):
    path = tmp_path / "history.jsonl"
    history = PromptHistory(path)
    history.add(f"fix {LONE} this")
    history.add("next")
    assert PromptHistory(path).entries == ["fix \ufffd this", "next"]


def test_predictions_and_reports_write_lone_surrogates_as_replacement_characters(tmp_path):
    """swebench's preds.jsonl and report are written as UTF-8 whatever the model's patch holds."""
    import json as _json

    from clover_cli.modes.swebench.predictions import PredictionsFile, write_atomic

    preds = PredictionsFile(tmp_path / "preds.jsonl")
    preds.put("i-1", "clover/m", "+x = '\ud800'\n")
    row = _json.loads((tmp_path / "preds.jsonl").read_text(encoding="utf-8"))
    assert row["model_patch"] == "+x = '\ufffd'\n"
    write_atomic(tmp_path / "report.json", '{"note": "\udfff"}')
    assert (tmp_path / "report.json").read_text(encoding="utf-8") == '{"note": "\ufffd"}'
