"""The registry contract (schemas, validation, planned writes) and the `clover tool` CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from clover_cli.tools.registry import (TOOL_NAMES, ToolArgumentError, is_writing_tool,
                                       planned_writes, preview, run_tool, tool_schemas,
                                       validate_args)

from in_process import clover

PROMPTS = Path(__file__).resolve().parents[2] / "prompts" / "tools"


def test_schemas_come_from_prompt_files():
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
    assert set(TOOL_NAMES) == {"read_file", "list_files", "grep", "repo_map", "run_shell",
                               "apply_patch", "edit_file", "write_file"}
    for s in schemas:
        fn = s["function"]
        assert s["type"] == "function" and fn["parameters"]["type"] == "object"
        text = (PROMPTS / f"{fn['name']}.txt").read_text()
        assert fn["description"] and fn["description"] in text
        for arg, prop in fn["parameters"]["properties"].items():
            assert prop["description"] and prop["description"] in text, (fn["name"], arg)
    by = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    assert by["edit_file"]["required"] == ["path", "old", "new"]
    assert by["repo_map"]["properties"]["paths"]["items"] == {"type": "string"}


def test_validation_and_bad_arguments():
    validate_args("read_file", {"path": "a", "start_line": "3"})  # numeric strings are accepted
    for name, args, msg in [("nope", {}, "unknown tool"),
                            ("read_file", {}, "missing required argument 'path'"),
                            ("read_file", {"path": "a", "colour": 1}, "unknown argument"),
                            ("read_file", {"path": 3}, "must be a string"),
                            ("grep", {"pattern": "x", "ignore_case": "maybe"}, "must be a boolean"),
                            ("read_file", {"path": "a", "start_line": 1.5}, "must be a integer"),
                            ("edit_file", [], "must be a JSON object")]:
        with pytest.raises(ToolArgumentError, match=msg):
            validate_args(name, args)
    res = run_tool("read_file", {"path": 3}, Path("."))
    assert not res.ok and res.details["error"] == "bad_arguments"


def test_writing_tools_and_planned_writes(git_repo):
    assert [n for n in TOOL_NAMES if is_writing_tool(n)] == ["apply_patch", "edit_file", "write_file"]
    patch = "--- a/README.md\n+++ b/docs/README.md\n@@ -1,3 +1,3 @@\n-x\n"  # unparseable: named paths
    assert planned_writes("apply_patch", {"patch": patch}, git_repo) == ["README.md", "docs/README.md"]
    good = "--- /dev/null\n+++ b/x/y.txt\n@@ -0,0 +1 @@\n+hi\n--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# demo\n"
    assert planned_writes("apply_patch", {"patch": good}, git_repo) == ["x/y.txt", "README.md"]
    assert planned_writes("run_shell", {"command": "rm -rf /"}, git_repo) == []
    assert not (git_repo / "x").exists() and (git_repo / "README.md").exists()


def test_cli_tool_contract(git_repo):
    res = clover("tool", "read_file", "--root", str(git_repo), "--args", '{"path": "README.md"}')
    assert res.returncode == 0
    out = json.loads(res.stdout)
    assert out == {"ok": True, "output": "     1\t# demo", "path": "README.md", "start_line": 1,
                   "end_line": 1, "total_lines": 1, "truncated": False,
                   "encoding": "utf-8"}
    res = clover("tool", "read_file", "--root", str(git_repo), "--args", '{"path": "missing"}')
    assert res.returncode == 0 and json.loads(res.stdout)["ok"] is False
    res = clover("tool", "run_shell", "--root", str(git_repo), "--args", '{"command": "exit 4"}')
    assert res.returncode == 0 and json.loads(res.stdout)["exit_code"] == 4
    res = clover("tool", "frobnicate", "--root", str(git_repo))
    assert res.returncode == 2 and json.loads(res.stdout)["error"] == "bad_arguments"
    res = clover("tool", "read_file", "--root", str(git_repo), "--args", "{not json")
    assert res.returncode == 2 and "not valid JSON" in json.loads(res.stdout)["output"]
    res = clover("tool", "read_file", "--root", str(git_repo), "--args", '{"line": 1}')
    assert res.returncode == 2
    res = clover("tool", "write_file", "--root", str(git_repo), "--args",
                 json.dumps({"path": "n.txt", "content": "x\n"}))
    assert res.returncode == 0 and (git_repo / "n.txt").read_text() == "x\n"


BAD_NUMBERS = ["nan", "NaN", "inf", "-Infinity", "1e400", "9" * 400, float("nan"), float("inf"),
               10 ** 400, -(10 ** 5000), "1" * 5000]


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=[str(i) for i in range(len(BAD_NUMBERS))])
def test_non_finite_and_huge_numbers_are_bad_arguments(tmp_path, value):
    (tmp_path / "a.txt").write_text("x\ny\n")
    with pytest.raises(ToolArgumentError, match="must be a integer"):
        validate_args("read_file", {"path": "a.txt", "start_line": value})
    with pytest.raises(ToolArgumentError, match="must be a number"):
        validate_args("run_shell", {"command": "true", "timeout": value})
    res = run_tool("read_file", {"path": "a.txt", "start_line": value}, tmp_path)
    assert not res.ok and res.details["error"] == "bad_arguments" and len(res.output) < 400
    res = run_tool("run_shell", {"command": "true", "timeout": value}, tmp_path)
    assert not res.ok and res.details["error"] == "bad_arguments"
    assert "invalid call" in preview("run_shell", {"command": "x", "timeout": value}, tmp_path)


def test_ordinary_numbers_still_coerce(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    res = run_tool("read_file", {"path": "a.txt", "start_line": "2", "end_line": 2.0}, tmp_path)
    assert res.ok and res.output == "     2\ty"
    validate_args("run_shell", {"command": "x", "timeout": "1.5"})
    validate_args("read_file", {"path": "a", "start_line": " +3 "})


@pytest.mark.parametrize("raw", ['"nan"', "NaN", "Infinity", "1e400", "9" * 400, '"1e400"'])
def test_cli_bad_numbers_exit_2_with_one_json_line(tmp_path, raw):
    (tmp_path / "a.txt").write_text("x\n")
    proc = clover("tool", "read_file", "--root", str(tmp_path), "--args",
                  '{"path": "a.txt", "start_line": %s}' % raw)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"] == "bad_arguments"


LIMITED = [  # (tool, arguments, what the one-line refusal says)
    ("read_file", {"path": "a/" * 2100}, "'path' is 4,200 bytes long; the limit is 4,096 bytes"),
    ("read_file", {"path": "x" * 256}, "a file name is at most 255 bytes"),
    ("read_file", {"path": "d/" + "é" * 128}, "component of 256 bytes"),
    ("write_file", {"path": "d/" + "n" * 300, "content": "x"}, "a file name is at most 255 bytes"),
    ("edit_file", {"path": "a" * 5000, "old": "x", "new": "y"}, "the limit is 4,096 bytes"),
    ("list_files", {"path": "sub/" + "p" * 400}, "a file name is at most 255 bytes"),
    ("list_files", {"pattern": "*" * 2000}, "'pattern' is 2,000 bytes long; the limit is 1,024"),
    ("grep", {"pattern": "(" * 9000}, "'pattern' is 9,000 bytes long; the limit is 8,192"),
    ("grep", {"pattern": "x", "glob": "{" * 1500}, "'glob' is 1,500 bytes long"),
    ("repo_map", {"paths": ["ok.py", "q" * 300]}, "a file name is at most 255 bytes"),
    ("repo_map", {"paths": ["a.py"] * 1001}, "has 1,001 items; the limit is 1,000"),
    ("run_shell", {"command": "echo " + "x" * 70_000}, "the limit is 65,536 bytes"),
    ("write_file", {"path": "big.txt", "content": "x" * (16 * 1024 * 1024 + 1)}, "the limit is 16,777,216"),
]


@pytest.mark.parametrize("name,args,message", LIMITED, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(LIMITED)])
def test_oversized_arguments_are_refused_before_the_tool_runs(tmp_path, name, args, message):
    res = run_tool(name, args, tmp_path)  # the error below is the argument check's, not the tool's
    assert not res.ok and res.details["error"] == "bad_arguments"
    assert res.output.startswith(f"{name}: argument ") and message in res.output, res.output
    assert "\n" not in res.output and len(res.output) <= 300
    assert not (tmp_path / "big.txt").exists()
    with pytest.raises(ToolArgumentError):
        validate_args(name, args)
    from clover_cli.tools.argcheck import path_error
    # a path no file could have is never snapshotted before the (refused) write
    assert all(path_error(p) is None for p in planned_writes(name, args, tmp_path))


def test_arguments_at_the_limits_still_run(tmp_path):
    name = "n" * 200  # (a 255-byte name fails in the write's temporary file name, .NAME.XXXX.clover-tmp)
    res = run_tool("write_file", {"path": f"d/{name}", "content": "hi\n"}, tmp_path)
    assert res.ok, res.output
    assert run_tool("read_file", {"path": f"d/{name}"}, tmp_path).output == "     1\thi"
    assert run_tool("grep", {"pattern": "h" + "i?" * 4000}, tmp_path).details["matches"] == 1


def test_lone_surrogates_in_arguments_are_replaced_and_output_is_valid_utf8(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    for name, args in (("read_file", {"path": "\ud800.txt"}), ("grep", {"pattern": "\udfff"}),
                       ("list_files", {"pattern": "\ud800*"}), ("write_file", {"path": "s\udc80.txt", "content": "\ud800"})):
        res = run_tool(name, args, tmp_path)
        res.output.encode("utf-8")
        json.dumps(res.as_dict(), ensure_ascii=False).encode("utf-8")
    assert (tmp_path / "s\ufffd.txt").read_text() == "\ufffd"


def test_cli_deeply_nested_args_exit_2_without_a_traceback(tmp_path):
    proc = clover("tool", "read_file", "--root", str(tmp_path), "--args",
                  '{"path": ' + "[" * 30_000 + "]" * 30_000 + "}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-500:]
    assert json.loads(proc.stdout.strip())["error"] == "bad_arguments"
