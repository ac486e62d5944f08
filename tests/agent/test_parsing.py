"""Tool-call parsing: both formats, tolerance, and clear errors."""
import json

from clover_cli.agent.parsing import parse_tool_calls, split_thinking


def hermes(name, args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def test_hermes_call_and_visible_text():
    r = parse_tool_calls("Let me look.\n" + hermes("read_file", {"path": "a.py"}))
    assert r.text == "Let me look."
    assert [(c.name, c.arguments) for c in r.calls] == [("read_file", {"path": "a.py"})]
    assert r.errors == []


def test_code_with_close_tag_and_raw_newlines_inside_json_string():
    content = 'x = "</tool_call>"\nif a < b:\n    print(1)\n'
    raw = hermes("write_file", {"path": "a.py", "content": content}) + " done"
    r = parse_tool_calls(raw)
    assert r.calls[0].arguments["content"] == content
    assert r.text == "done"
    # a model writing literal newlines inside a JSON string (not strictly valid JSON)
    raw2 = '<tool_call>{"name": "write_file", "arguments": {"path": "b.py", "content": "a\nb"}}</tool_call>'
    assert parse_tool_calls(raw2).calls[0].arguments["content"] == "a\nb"


def test_unterminated_last_call_is_recovered():
    r = parse_tool_calls('<tool_call>{"name": "read_file", "arguments": {"path": "a.py"')
    assert [(c.name, c.arguments) for c in r.calls] == [("read_file", {"path": "a.py"})]
    r2 = parse_tool_calls(hermes("grep", {"pattern": "x"}) + '<tool_call>{"name": "read_file", "arguments": {}}')
    assert [c.name for c in r2.calls] == ["grep", "read_file"]


def test_qwen3_coder_xml_with_types_and_code():
    raw = ("<tool_call>\n<function=edit_file>\n<parameter=path>\na.py\n</parameter>\n"
           "<parameter=old>\nif a < b and c > d:\n    return '</parameter>'\n</parameter>\n"
           "<parameter=count>\n3\n</parameter>\n</function>\n</tool_call>")
    schemas = {"edit_file": {"properties": {"count": {"type": "integer"}, "old": {"type": "string"}}}}
    r = parse_tool_calls(raw, schemas)
    assert r.errors == []
    assert r.calls[0].arguments == {"path": "a.py", "old": "if a < b and c > d:\n    return '</parameter>'", "count": 3}


def test_xml_unterminated():
    r = parse_tool_calls("<tool_call>\n<function=shell>\n<parameter=command>\npytest -q")
    assert r.calls[0].name == "shell" and r.calls[0].arguments == {"command": "pytest -q"}


def test_thinking_is_ignored():
    r = parse_tool_calls("<think>maybe " + hermes("shell", {"command": "rm"}) + "</think>Answer")
    assert r.calls == [] and r.text == "Answer"
    thinking, answer = split_thinking("plan</think>final")  # template opened <think> in the prompt
    assert thinking == "plan" and answer == "final"


def test_malformed_calls_give_errors():
    r = parse_tool_calls("<tool_call>{bad json}</tool_call> mid <tool_call>hello</tool_call>"
                         '<tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "x", "arguments": [1]}</tool_call>')
    assert r.calls == []
    assert [e.message for e in r.errors] == [
        "the tool call is not valid JSON",
        'a tool call must contain a JSON object {"name": ..., "arguments": {...}} '
        "or <function=NAME><parameter=ARG>value</parameter></function>",
        'the tool call has no "name" string',
        'the "arguments" of x must be a JSON object']
    assert r.errors[0].snippet == "{bad json}"
    assert r.text == "mid"


def test_arguments_as_json_string_and_no_arguments():
    r = parse_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call><tool_call>{"name": "b"}</tool_call>')
    assert [(c.name, c.arguments) for c in r.calls] == [("a", {"x": 1}), ("b", {})]
