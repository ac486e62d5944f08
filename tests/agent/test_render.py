"""Prompt rendering for templates without tool support, and the replay backend's stream."""
import json

from clover_cli.agent.backends import Completion, make_backend
from clover_cli.agent.markup import MarkupSplitter
from clover_cli.agent.render import flatten, render_fallback

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read.", "parameters": {}}}]
CONV = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "A1"},
        {"role": "tool", "tool_call_id": "c2", "name": "read_file", "content": "A2"}]


def test_fallback_template_chatml():
    text = render_fallback(CONV, TOOLS)
    assert text.startswith("<|im_start|>system\nSYS\n\n# Tools")
    assert json.dumps(TOOLS[0]) in text
    assert ('<|im_start|>assistant\nok\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n'
            "</tool_call><|im_end|>\n") in text
    assert "<|im_start|>user\n<tool_response>\nA1\n</tool_response>\n<tool_response>\nA2\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_flatten_for_templates_without_tools():
    flat = flatten(CONV, TOOLS)
    assert [m["role"] for m in flat] == ["system", "user", "assistant", "user"]
    assert "# Tools" in flat[0]["content"] and flat[3]["content"].count("<tool_response>") == 2
    assert '<tool_call>\n{"name": "read_file"' in flat[2]["content"]


def test_think_splitter_across_chunks():
    s = MarkupSplitter()
    out = s.feed("a<th") + s.feed("ink>b</") + s.feed("think>c") + s.flush()
    assert out == [("a", "answer"), ("b", "thinking"), ("c", "answer")]


def test_replay_streams_chunks_then_empty(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"completions": ["<think>plan</think>Hello world, this is long."]}))
    b = make_backend(f"replay:{f}", chunk_chars=5)
    items = list(b.stream([{"role": "user", "content": "x"}], []))
    comp = items[-1]
    assert isinstance(comp, Completion) and comp.text == "<think>plan</think>Hello world, this is long."
    assert "".join(i.text for i in items[:-1] if not i.thinking) == "Hello world, this is long."
    assert "".join(i.text for i in items[:-1] if i.thinking) == "plan"
    assert len(items) > 5
    again = list(b.stream([], []))
    assert again[-1].text == "" and b.calls == 2


def test_replay_bad_file(tmp_path):
    import pytest
    from clover_cli.agent.backends import BackendError
    with pytest.raises(BackendError, match="not found"):
        make_backend(f"replay:{tmp_path / 'missing.json'}")
    (tmp_path / "bad.json").write_text('{"completions": [1]}')
    with pytest.raises(BackendError, match="must be"):
        make_backend(f"replay:{tmp_path / 'bad.json'}")


def test_earlier_thinking_is_not_rendered_again():
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>long plan</think>Answer."}]
    assert "long plan" not in render_fallback(conv, [])
    assert flatten(conv, [])[1]["content"] == "Answer."
    from clover_cli.agent.backends.openai_backend import to_openai_messages
    assert to_openai_messages(conv)[1]["content"] == "Answer."
