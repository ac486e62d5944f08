"""The one markup rule (clover_cli/agent/markup.py, docs/agent.md "Visible text"): every tool-call
form the parser reads, and thinking, marked the same however the stream is cut into chunks, and
the answer it leaves is the parser's visible text."""
from __future__ import annotations

import pytest

from clover_cli.agent.events import BlockText
from clover_cli.agent.markup import HeldCalls, MarkupSplitter, attempted, block_texts, split_message
from clover_cli.agent.parsing import parse_tool_calls

Q = '<|"|>'
HERMES = '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>'
QUOTING = ('<tool_call>{"name": "write_file", "arguments": {"path": "t.md", '
           '"content": "a <tool_call> b </tool_call> c"}}</tool_call>')
XML = ('<tool_call>\n<function=write_file>\n<parameter=path>\nt.md\n</parameter>\n<parameter=content>\n'
       'x = "</tool_call>"\n</parameter>\n</function>\n</tool_call>')
GEMMA = f"<|tool_call>call:read_file{{path:{Q}a.py{Q},limit:20}}<tool_call|>"
GEMMA_QUOTING = f"<|tool_call>call:write_file{{path:{Q}t.md{Q},content:{Q}a <tool_call|> b{Q}}}<tool_call|>"

# (model text, the call markup it holds as written, its thinking)
CASES = {
    "hermes": (f"Let me look.\n{HERMES}\nDone.", HERMES, ""),
    "hermes quoting its closing tag": (f"Writing.{QUOTING} after", QUOTING, ""),
    "qwen3-coder xml": (f"I will edit.\n{XML}\nok", XML, ""),
    "diffusiongemma": (f"Reading.\n{GEMMA}\nThen more.", GEMMA, ""),
    "diffusiongemma quoting its closing tag": (f"{GEMMA_QUOTING}after", GEMMA_QUOTING, ""),
    "two calls": (f"a {HERMES} b {HERMES}", HERMES + HERMES, ""),
    "thinking, then a call": (f"<think>plan <tool_call> not one</think>Answer {HERMES}", HERMES,
                              "plan <tool_call> not one"),
    "a call with no closing tag, then text": ('Hi <tool_call>{"name": "list_dir", "arguments": {}} Thanks!',
                                               '<tool_call>{"name": "list_dir", "arguments": {}}', ""),
    "unterminated": ('Let me see.\n<tool_call>{"nam', '<tool_call>{"nam', ""),
    "unterminated gemma": (f"See.\n<|tool_call>call:read_file{{path:{Q}a.p",
                           f"<|tool_call>call:read_file{{path:{Q}a.p", ""),
    "no markup, a tag's start": ("x < y and a <tool_ thing </think", "", ""),
}


def _split(chunks: list[str]) -> list[tuple[str, str]]:
    """The merged (piece, kind) pairs of a stream cut into `chunks`."""
    splitter = MarkupSplitter()
    pieces = [p for chunk in chunks for p in splitter.feed(chunk)] + splitter.flush()
    merged: list[tuple[str, str]] = []
    for piece, kind in pieces:
        assert piece, "an empty piece"
        if merged and merged[-1][1] == kind:
            merged[-1] = (merged[-1][0] + piece, kind)
        else:
            merged.append((piece, kind))
    return merged


def _kind(pieces, kind: str) -> str:
    return "".join(p for p, k in pieces if k == kind)


@pytest.mark.parametrize("name", list(CASES))
def test_every_form_is_marked_alike_at_every_chunk_boundary(name):
    text, calls, thinking = CASES[name]
    whole = _split([text])
    answer = _kind(whole, "answer")
    assert _kind(whole, "call") == calls and _kind(whole, "thinking") == thinking
    assert answer.strip() == parse_tool_calls(text).text  # the screen shows what the parser leaves
    assert "tool_call>" not in answer and "<|tool_call" not in answer
    assert _split(list(text)) == whole, "one character at a time"
    for cut in range(1, len(text)):
        assert _split([text[:cut], text[cut:]]) == whole, f"cut at {cut}: {text[:cut]!r}"


def test_a_call_is_ended_by_the_parser_not_by_the_first_closing_tag():
    """Fails with a filter that ends a call at its first `</tool_call>`: the rest of the argument
    would reach the screen."""
    splitter = MarkupSplitter()
    chunks = ("ok <tool_call>", QUOTING[len("<tool_call>"):], " after")
    shown = [p for chunk in chunks for p in splitter.feed(chunk)]
    assert _kind(shown + splitter.flush(), "answer") == "ok  after"


def test_a_stream_opened_inside_thinking_and_block_events():
    events = block_texts(MarkupSplitter(inside=True), f"plan</think>Do it.{GEMMA}", 3, final=True)
    assert [(e.text, e.kind, e.block_index) for e in events] == [
        ("plan", "thinking", 3), ("Do it.", "answer", 3), (GEMMA, "call", 3)]
    assert events[0].thinking and not events[1].thinking
    assert BlockText("why", 0, thinking=True).kind == "thinking"  # as a server's reasoning comes


def test_a_malformed_gemma_call_names_the_tool_it_tried():
    assert attempted(f"<|tool_call>call:read_file{{path:{Q}a.py") == "read_file"


def test_held_call_text_is_given_back_once_when_no_call_ran():
    held = HeldCalls()
    for e in block_texts(MarkupSplitter(), 'Hi <tool_call>{"name": "x"', 0, final=True):
        held.note(e)
    [back] = held.release()
    assert (back.text, back.kind) == ('<tool_call>{"name": "x"', "unrun_call")
    assert held.release() == []


def test_a_stored_message_is_marked_by_the_same_rule():
    text = f"<think>hm</think>Reading.{GEMMA}"
    assert split_message(text, called=True) == [("hm", "thinking"), ("Reading.", "answer"), (GEMMA, "call")]
    assert split_message(text, called=False)[-1] == (GEMMA, "unrun_call")
