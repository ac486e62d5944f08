"""The bundled tokenizer's ChatML template renders tools, tool calls and tool responses."""
from __future__ import annotations

TOOLS = [{"type": "function", "function": {
    "name": "grep", "description": "Search files.",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}},
                   "required": ["pattern"]}}}]


def test_special_tokens_are_single_ids(tok):
    for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>", "<tool_call>",
              "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
              "<|pad|>"):
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids[0]) == t
    assert tok.eos_token == "<|im_end|>"
    assert 2048 <= len(tok) <= 8192


def test_renders_tools_calls_and_responses(tok):
    msgs = [{"role": "system", "content": "You are Clover."},
            {"role": "user", "content": "where is parse_spec defined?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "grep",
                                                  "arguments": {"pattern": "def parse_spec"}}}]},
            {"role": "tool", "content": "engine/spec.py:44: def parse_spec(spec):"},
            {"role": "assistant", "content": "In engine/spec.py at line 44."}]
    text = tok.apply_chat_template(msgs, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are Clover.\n\n# Tools\n<tools>\n")
    # compact schema: name, parameter types, required (descriptions left out to keep the
    # prompt short for the tiny model; see docs/model.md)
    assert ('<tools>\n{"name": "grep", "parameters": {"pattern": "string"}, '
            '"required": ["pattern"]}\n</tools>') in text
    assert ('<|im_start|>assistant\n<tool_call>{"name": "grep", "arguments": '
            '{"pattern": "def parse_spec"}}</tool_call><|im_end|>\n') in text
    assert ("<|im_start|>user\n<tool_response>\nengine/spec.py:44: def parse_spec(spec):\n"
            "</tool_response><|im_end|>\n") in text
    assert text.endswith("In engine/spec.py at line 44.<|im_end|>\n<|im_start|>assistant\n")


def test_no_tools_no_system_and_string_arguments(tok):
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok", "tool_calls": [
                {"function": {"name": "list_files", "arguments": '{"path": "src"}'}}]}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text == ('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nok\n'
                    '<tool_call>{"name": "list_files", "arguments": {"path": "src"}}</tool_call>'
                    '<|im_end|>\n')


def test_consecutive_tool_messages_share_one_user_turn(tok):
    msgs = [{"role": "user", "content": "q"},
            {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text.count("<|im_start|>user") == 2
    assert "<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>" in text


def test_thinking_toggle(tok):
    msgs = [{"role": "user", "content": "q"}]
    on = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    off = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False,
                                  enable_thinking=False)
    assert off == on + "<think>\n\n</think>\n\n"
