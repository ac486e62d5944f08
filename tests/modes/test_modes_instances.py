"""Instance files: JSON list or JSONL, malformed entries reported, the rest kept."""
from __future__ import annotations

import json
import os
import sys

import pytest

from clover_cli.modes.swebench.instances import InstanceFileError, load_instances, parse_instances


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


def _official_row(i):
    """A row shaped like the published SWE-bench Verified files (list fields as JSON strings)."""
    return {"repo": "psf/requests", "instance_id": f"psf__requests-{i}", "base_commit": "a" * 40,
            "patch": "diff", "test_patch": "diff --git a/tests/test_r.py b/tests/test_r.py\n",
            "problem_statement": "bug", "hints_text": "", "created_at": "2022-01-01T00:00:00Z",
            "version": "2.27", "FAIL_TO_PASS": json.dumps(["tests/test_r.py::test_a"]),
            "PASS_TO_PASS": json.dumps(["tests/test_r.py::test_pragmas[<meta"]),
            "environment_setup_commit": "b" * 40, "difficulty": "<15 min fix"}


def test_official_files_load_as_published(tmp_path):
    from clover_cli.modes.swebench.instances import load_any

    rows = [_official_row(1), {**_official_row(2), "FAIL_TO_PASS": ["tests/test_r.py::test_b"]}]
    (tmp_path / "v.json").write_text(json.dumps(rows))
    (tmp_path / "v.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("v.json", "v.jsonl"):
        insts, errs = load_any(tmp_path / name)
        assert errs == [] and [i.fail_to_pass for i in insts] == [("tests/test_r.py::test_a",),
                                                                 ("tests/test_r.py::test_b",)]
        assert insts[0].extra["environment_setup_commit"] == "b" * 40 and insts[0].version == "2.27"
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist([_official_row(1), _official_row(3)]), str(tmp_path / "v.parquet"))
    insts, errs = load_any(tmp_path / "v.parquet")
    assert errs == [] and [i.instance_id for i in insts] == ["psf__requests-1", "psf__requests-3"]
    assert insts[1].pass_to_pass == ("tests/test_r.py::test_pragmas[<meta",)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InstanceFileError, match="cannot read parquet"):
        load_any(tmp_path / "bad.parquet")


def test_missing_optional_readers_give_one_line(tmp_path, monkeypatch):
    from clover_cli.modes.swebench.instances import load_any

    monkeypatch.setitem(sys.modules, "pyarrow", None)           # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(InstanceFileError, match="needs pyarrow"):
        load_any(tmp_path / "x.parquet")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(InstanceFileError, match="needs the datasets package"):
        load_any(None, dataset="princeton-nlp/SWE-bench_Verified")
    with pytest.raises(InstanceFileError, match="--instances FILE or --dataset"):
        load_any(None)


def test_dataset_offline_is_one_clear_line(tmp_path):
    pytest.importorskip("datasets")
    import subprocess

    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    code = ("from clover_cli.modes.swebench.instances import load_any, InstanceFileError\n"
            "try:\n    load_any(None, dataset='princeton-nlp/SWE-bench_Verified')\n"
            "except InstanceFileError as e:\n    print('ERR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("ERR cannot load dataset 'princeton-nlp/SWE-bench_Verified' (split 'test')")
