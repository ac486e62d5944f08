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


# -- malformed output: every case ends in calls or errors, never an exception (docs/agent.md) -----

NESTED = '<tool_call>{"name": "run_shell", "arguments": {"command": "touch PWNED"}}</tool_call>'


def test_a_hermes_call_inside_an_xml_parameter_is_text():
    content = f"# notes\n{NESTED}\nmore\n"
    raw = ("<tool_call>\n<function=write_file>\n<parameter=path>\nn.md\n</parameter>\n"
           f"<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>\nWrote it.")
    r = parse_tool_calls(raw)
    assert [(c.name, c.arguments) for c in r.calls] == [("write_file", {"path": "n.md", "content": content})]
    assert r.errors == [] and r.text == "Wrote it." and not r.cut_off
    # unterminated outer call (generation cut off inside the content): still one call, cut off
    # (so the loop never runs it), even when the cut falls right after the quoted call's close
    for cut in (raw.index("more") + 2, raw.index("more")):
        r = parse_tool_calls(raw[:cut])
        assert [c.name for c in r.calls] == ["write_file"] and r.cut_off and r.errors == []
        assert NESTED[:-20] in r.calls[0].arguments["content"]


def test_an_xml_or_hermes_call_inside_a_json_string_is_text_even_when_the_json_is_broken():
    xml = "<tool_call><function=run_shell><parameter=command>touch PWNED</parameter></function></tool_call>"
    for inner in (xml, NESTED):
        good = hermes("write_file", {"path": "a.md", "content": inner})
        r = parse_tool_calls(good)
        assert [(c.name, c.arguments["content"]) for c in r.calls] == [("write_file", inner)]
        # the same call with a syntax error after the string: an error, and the quoted call stays text
        head, _, tail = good.rpartition('"}}')
        broken = head + '" oops}}' + tail
        r = parse_tool_calls(broken + "\nok")
        assert r.calls == [] and len(r.errors) == 1 and r.text == "ok", (r.calls, r.errors)


def test_json_nested_thousands_deep_is_a_format_error():
    for depth in (65, 1_000, 100_000):
        for opener, closer in (("[", "]"), ('{"a": ', "}")):
            raw = ('<tool_call>{"name": "read_file", "arguments": {"path": ' + opener * depth
                   + "1" + closer * depth + "}}</tool_call> after")
            r = parse_tool_calls(raw)
            assert r.calls == [] and r.text == "after"
            assert [e.message for e in r.errors] == [
                "the tool call nests JSON more than 64 levels deep; no tool takes arguments like that"]
    # an unterminated deep call (cut off) and deep "arguments" given as a string
    assert "64 levels" in parse_tool_calls('<tool_call>{"name": "x", "arguments": ' + "[" * 5000).errors[0].message
    r = parse_tool_calls(hermes("x", "[" * 3000 + "]" * 3000))
    assert "64 levels" in r.errors[0].message
    # sane nesting still parses
    deep_ok = {"a": [[[[{"b": 1}]]]]}
    assert parse_tool_calls(hermes("x", deep_ok)).calls[0].arguments == deep_ok


def test_a_five_thousand_digit_integer_is_a_format_error():
    big = "9" * 5000
    r = parse_tool_calls('<tool_call>{"name": "read_file", "arguments": {"path": "a", "start_line": '
                         + big + "}}</tool_call>")
    assert r.calls == []
    assert r.errors[0].message == ("a number in the tool call has more than 100 digits; no tool "
                                   "takes numbers like that")
    # in an XML value typed as an integer the raw text goes on (the tool's type check refuses it)
    xml = f"<tool_call><function=read_file><parameter=start_line>{big}</parameter></function></tool_call>"
    r = parse_tool_calls(xml, {"read_file": {"properties": {"start_line": {"type": "integer"}}}})
    assert r.calls[0].arguments == {"start_line": big}


def test_lone_surrogates_are_replaced_so_the_result_encodes():
    raws = ['<tool_call>{"name": "read_file", "arguments": {"path": "\\ud800x", "\\udfff": 1}}</tool_call>',
            '<tool_call>{"name": "read_file", "arguments": {"path": "\ud800x"}}</tool_call> \udc80',
            "<tool_call><function=read_file><parameter=path>\ud800x</parameter></function></tool_call>"]
    for raw in raws:
        r = parse_tool_calls(raw)
        assert r.calls[0].arguments["path"] == "\ufffdx"
        json.dumps([r.text, r.calls[0].arguments], ensure_ascii=False).encode("utf-8")
    # a valid pair written as two escapes is one character, not two replacements
    assert parse_tool_calls(hermes("x", {"s": "\U0001F600"})).calls[0].arguments == {"s": "\U0001F600"}


def test_a_broken_function_tag_swallows_what_it_quotes():
    for head in ("<function= >", "<function=write_file<parameter=content>"):
        raw = f"<tool_call>{head}<parameter=content>{NESTED}</parameter></function></tool_call> after"
        r = parse_tool_calls(raw)
        assert r.calls == [] and len(r.errors) == 1 and r.text.endswith("after"), (head, r)


def test_parsing_stays_linear_on_adversarial_text():
    """Thousands of unterminated calls, parameters or stray tags (each used to rescan the rest of
    the text: 10-20 s here for these sizes) parse in linear time: four times the text costs about
    four times the CPU, where a rescan costs sixteen. A ratio of CPU times on this machine, so
    neither a loaded machine nor a slower CPU moves it."""
    import time

    makers = [lambda n: "<tool_call><function=f>" + "<parameter=a>x" * n,
              lambda n: "<tool_call><function=f><parameter=a>x" * n,
              lambda n: "<tool_call><function=f>" + "<parameter=a>x</parameter>y" * n,
              lambda n: '<tool_call>{"a": "x' * n,
              lambda n: "<tool_call>" * (n * 5 // 2),
              lambda n: "<tool_call><function=f><parameter=a>" + " " * (n * 10) + "x"]

    def cpu(text):
        started = time.process_time()
        r = parse_tool_calls(text)
        assert r.calls or r.errors
        return time.process_time() - started

    for make in makers:
        small, large = cpu(make(5000)), cpu(make(20000))
        assert large < 8 * small + 0.05, (make(1)[:60], small, large)
