"""Gemma 4's native tool calls (DiffusionGemma's template): `<|tool_call>call:NAME{...}<tool_call|>`
read by the agent's parser (clover_cli/agent/gemma_calls.py), tolerant as the other forms."""
from __future__ import annotations

from clover_cli.agent.encode import MODEL_MARKUP
from clover_cli.agent.parsing import ParsedCall, has_open_call, parse_tool_calls

Q = '<|"|>'


def test_a_call_with_typed_values():
    raw = (f"Reading it.<|tool_call>call:read_file{{path:{Q}src/a.py{Q},limit:20,start:1.5,"
           f"all:true,skip:null,tags:[{Q}x{Q},2],opts:{{deep:{{n:-3}}}}}}<tool_call|>")
    out = parse_tool_calls(raw)
    assert out.calls == [ParsedCall("read_file", {"path": "src/a.py", "limit": 20, "start": 1.5,
                                                  "all": True, "skip": None, "tags": ["x", 2],
                                                  "opts": {"deep": {"n": -3}}})]
    assert out.text == "Reading it." and not out.errors and not out.cut_off


def test_strings_keep_code_with_braces_quotes_and_newlines():
    code = 'def f(x):\n    return {"a": [x, \'}\']}  # <tool_call|> in a string\n'
    raw = f"<|tool_call>call:write_file{{path:{Q}f.py{Q},content:{Q}{code}{Q}}}<tool_call|>"
    out = parse_tool_calls(raw)
    assert out.calls == [ParsedCall("write_file", {"path": "f.py", "content": code})]


def test_several_calls_and_the_text_between():
    raw = (f"a<|tool_call>call:grep{{pattern:{Q}x{Q}}}<tool_call|> b "
           f"<|tool_call>call:list_dir{{}}<tool_call|>c")
    out = parse_tool_calls(raw)
    assert [c.name for c in out.calls] == ["grep", "list_dir"] and out.calls[1].arguments == {}
    assert out.text == "a b c"


def test_an_unterminated_last_call_is_returned_and_cut_off():
    raw = f"<|tool_call>call:write_file{{path:{Q}f.py{Q},content:{Q}line one\nline tw"
    out = parse_tool_calls(raw)
    assert out.calls == [ParsedCall("write_file", {"path": "f.py", "content": "line one\nline tw"})]
    assert out.cut_off
    done = parse_tool_calls(f"<|tool_call>call:list_dir{{path:{Q}.{Q}}}")  # no closing token
    assert done.calls == [ParsedCall("list_dir", {"path": "."})] and done.cut_off


def test_a_malformed_call_is_a_format_error_and_later_calls_still_read():
    raw = (f"<|tool_call>read_file{{path:{Q}a{Q}}}<tool_call|>"
           f"<|tool_call>call:grep{{pattern {Q}x{Q}}}<tool_call|>"
           f"<|tool_call>call:list_dir{{}}<tool_call|>")
    out = parse_tool_calls(raw)
    assert out.calls == [ParsedCall("list_dir", {})]
    assert len(out.errors) == 2 and all("<|tool_call>call:NAME{" in e.message for e in out.errors)
    assert out.text == ""


def test_calls_inside_thinking_are_ignored_and_markup_is_seen():
    raw = f"<think><|tool_call>call:rm{{}}<tool_call|></think>ok"
    assert parse_tool_calls(raw).calls == [] and not has_open_call(raw)
    assert has_open_call(f"<|tool_call>call:list_dir{{}}<tool_call|>")


def test_the_models_call_tokens_stay_tokens_in_later_prompts():
    assert {"<|tool_call>", "<tool_call|>", Q} <= set(MODEL_MARKUP)


def test_hermes_calls_are_unchanged():
    raw = '<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_call>'
    assert parse_tool_calls(raw).calls == [ParsedCall("grep", {"pattern": "x"})]
