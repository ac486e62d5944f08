"""The transcript generator's calls are accepted by the agent's parser and our tools, and the
recorded tool results are what a fresh run of the tool returns."""
from __future__ import annotations

import random
import textwrap

import pytest


@pytest.fixture()
def package(tmp_path):
    pkg = tmp_path / "pkgsrc" / "demo_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .core import Engine\n")
    (pkg / "core.py").write_text(textwrap.dedent('''
        class Engine:
            def start_motor(self, speed):
                return helper_value(speed)


        def helper_value(x):
            return x * 2
        '''))
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "util.py").write_text("def tidy_up(items):\n    return sorted(items)\n")
    (pkg / "sub" / "more.py").write_text("from .util import tidy_up\n\nVALUE = tidy_up([3, 1])\n")
    return pkg


def test_generated_calls_parse_validate_and_replay(tmp_path, package, tok):
    from clover_cli.agent.parsing import parse_tool_calls
    from clover_cli.training import transcripts
    from clover_cli.tools.registry import TOOL_NAMES, run_tool, tool_schemas, validate_args

    out = tmp_path / "t.jsonl"
    recs = list(transcripts.generate(out, 12, seed=3, p_system=0.5, repos=[package],
                                     cache=tmp_path / "repos", p_tests=0.0))
    assert len(recs) == 12
    assert len(transcripts.load_records(out)) == 12
    kinds = {r["kind"] for r in recs}
    assert len(kinds) >= 3
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas()}
    for rec in recs:
        text = transcripts.render(tok, rec)
        call_text = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
        parsed = parse_tool_calls(call_text, schemas)
        assert not parsed.errors, parsed.errors
        assert len(parsed.calls) == 1
        call = parsed.calls[0]
        assert call.name in TOOL_NAMES and call.name == rec["tool"]
        assert call.arguments == rec["arguments"]
        validate_args(call.name, call.arguments)
        fresh = run_tool(call.name, call.arguments, transcripts.Path(rec["root"]))
        assert fresh.ok and fresh.output == rec["result"]
        assert rec["result"] in text  # the real result sits in the tool response
        # the copied name/path is what the user asked about
        assert rec["x"] in rec["messages"][0]["content"] or rec["x"] in rec["messages"][-4]["content"]


def test_grounded_answers(tmp_path, package):
    from clover_cli.training import transcripts

    recs = list(transcripts.generate(tmp_path / "t.jsonl", 30, seed=1, repos=[package],
                                     cache=tmp_path / "repos", p_tests=0.0))
    defines = [r for r in recs if r["kind"] == "define"]
    assert defines
    for r in defines:
        want = {"Engine": ("core.py", "2"), "start_motor": ("core.py", "3"),
                "helper_value": ("core.py", "7"), "tidy_up": ("sub/util.py", "1")}[r["x"]]
        answer = r["messages"][-1]["content"]
        assert want[0] in answer and want[1] in answer


def test_synthetic_calls_are_valid(tok):
    from clover_cli.agent.parsing import parse_tool_calls
    from clover_cli.training import transcripts
    from clover_cli.tools.registry import validate_args

    rng = random.Random(0)
    for _ in range(20):
        text = transcripts.synthetic_call_chat(rng, tok, p_system=0.3)
        call_text = text.rsplit("<|im_start|>assistant\n", 1)[1]
        parsed = parse_tool_calls(call_text)
        assert len(parsed.calls) == 1 and not parsed.errors
        validate_args(parsed.calls[0].name, parsed.calls[0].arguments)


def test_run_the_tests_transcripts(tmp_path, tok, monkeypatch):
    """'run the tests' transcripts: a generated repository, the real pytest run through
    run_shell, and an answer quoting the run's summary (and the first failing test)."""
    import re

    from clover_cli.agent.parsing import parse_tool_calls
    from clover_cli.training import transcripts
    from clover_cli.tools.registry import validate_args

    # each record is a real pytest run (seconds): seed 0's first three already hold a failing
    # and a passing run; the toy repositories need no plugins (3x faster child pytest)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    recs = list(transcripts.generate(tmp_path / "t.jsonl", 3, seed=0, p_tests=1.0,
                                     cache=tmp_path / "repos"))
    assert len(recs) == 3
    outcomes = set()
    for rec in recs:
        assert rec["kind"] == "tests" and rec["tool"] == "run_shell"
        text = transcripts.render(tok, rec)
        call_text = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
        parsed = parse_tool_calls(call_text)
        assert len(parsed.calls) == 1 and not parsed.errors
        assert parsed.calls[0].arguments == {"command": "python -m pytest -q"}
        validate_args("run_shell", parsed.calls[0].arguments)
        result, answer = rec["result"], rec["messages"][-1]["content"]
        summary = re.search(r"(\d+ (?:failed|passed)[^)]*?)(?:\)|\.|:|;)", answer).group(1)
        assert summary in result, (summary, result)  # grounded in the real run
        if "failed" in summary:
            outcomes.add("fail")
            test = re.search(r"(test_\w+) in (\S+) fails", answer)
            assert f"FAILED {test.group(2)}::{test.group(1)}" in result
        else:
            outcomes.add("pass")
            assert "[exit code 0]" in result
    assert outcomes == {"pass", "fail"}


def test_transcripts_behind_the_agent_system_prompt(tmp_path, package, tok):
    """transcripts_sys renders a record as `clover run` sends it: the agent's system prompt for
    the record's root and the tool schemas first, then the unchanged conversation."""
    from clover_cli.training import transcripts
    from clover_cli.training.data import chat_example

    out = tmp_path / "t.jsonl"
    list(transcripts.generate(out, 4, seed=2, repos=[package], cache=tmp_path / "repos",
                              p_tests=0.0))
    for rec in transcripts.load_records(out):
        text = transcripts.render_with_system(tok, rec)
        assert text.count("<|im_start|>system") == 1
        assert transcripts.agent_system(rec["root"]).splitlines()[0] in text
        assert '"name": "read_file"' in text  # tool schemas
        plain = transcripts.render(tok, rec)
        assert text.endswith(plain.split("<|im_start|>user", 1)[1])
        ex = chat_example(tok, text)  # loss only on the assistant turns (call + answer)
        scored = tok.decode([i for i, ok in zip(ex.ids, ex.loss_ok) if ok])
        assert rec["messages"][-1]["content"] in scored and "Clover" not in scored


def test_generation_without_pytest_says_so(tmp_path, monkeypatch):
    """'run the tests' transcripts need pytest; without it the generator stops with a clear
    error instead of retrying forever."""
    import importlib.util

    from clover_cli.training import transcripts

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytest" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install .clover-cli\[train\]."):
        list(transcripts.generate(tmp_path / "t.jsonl", 2, p_tests=1.0, cache=tmp_path / "r"))


def test_generation_stalls_with_a_clear_error(tmp_path, monkeypatch):
    from clover_cli.training import transcripts

    monkeypatch.setattr(transcripts, "make_tests_transcript", lambda *a, **k: None)
    with pytest.raises(ValueError, match="stalled"):
        list(transcripts.generate(tmp_path / "t.jsonl", 2, p_tests=1.0, cache=tmp_path / "r"))
