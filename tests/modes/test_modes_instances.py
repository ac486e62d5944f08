"""Instance files: JSON list or JSONL, malformed entries reported, the rest kept."""
from __future__ import annotations

import json

import pytest

from clover_cli.modes.instances import InstanceFileError, load_instances, parse_instances


def _inst(i, **extra):
    return {"instance_id": f"o__n-{i}", "repo": "o/n", "base_commit": "abc123",
            "problem_statement": f"bug {i}", **extra}


def test_jsonl_with_malformed_lines_keeps_the_good_ones():
    lines = [json.dumps(_inst(1)), "{not json", "", json.dumps({"instance_id": "x", "repo": "o/n"}),
             json.dumps(_inst(2, FAIL_TO_PASS='["t.py::a"]', PASS_TO_PASS=["t.py::b"])),
             json.dumps(_inst(1)), json.dumps([1, 2]), json.dumps(_inst(3, repo="noslash"))]
    instances, errors = parse_instances("\n".join(lines))
    assert [i.instance_id for i in instances] == ["o__n-1", "o__n-2"]
    assert instances[1].fail_to_pass == ("t.py::a",)
    assert instances[1].pass_to_pass == ("t.py::b",)
    assert instances[0].repo_folder == "o__n"
    where = {e.where: e for e in errors}
    assert set(where) == {"line 2", "line 4", "line 6", "line 7", "line 8"}
    assert "not valid JSON" in where["line 2"].message
    assert "base_commit" in where["line 4"].message and where["line 4"].key() == "x"
    assert "duplicate" in where["line 6"].message
    assert "JSON object" in where["line 7"].message
    assert "owner/name" in where["line 8"].message and where["line 8"].key() == "o__n-3"


def test_json_list_and_bad_test_lists():
    text = json.dumps([_inst(1, version="1.0", test_patch="diff"), _inst(2, FAIL_TO_PASS="nope"),
                       _inst(3, FAIL_TO_PASS=[1, 2])])
    instances, errors = parse_instances(text)
    assert [(i.instance_id, i.version, i.test_patch) for i in instances] == [("o__n-1", "1.0", "diff")]
    assert [(e.where, e.instance_id) for e in errors] == [("entry 2", "o__n-2"), ("entry 3", "o__n-3")]


def test_whole_file_errors(tmp_path):
    with pytest.raises(InstanceFileError, match="not found"):
        load_instances(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.json"
    bad.write_text("[{\"instance_id\": ")
    with pytest.raises(InstanceFileError, match="not valid JSON"):
        load_instances(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert load_instances(empty) == ([], [])
