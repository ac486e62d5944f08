"""The one-line summary of a tool's result that text mode prints (clover_cli/agent/summary.py)."""
import json

from clover_cli.agent.summary import result_line


def test_json_is_compacted_onto_one_line():
    data = {"word": "clover", "senses": [{"leaves": 3}]}
    assert result_line(json.dumps(data, indent=2)) == '{"word": "clover", "senses": [{"leaves": 3}]}'
    assert result_line("[\n  1,\n  2\n]") == "[1, 2]"


def test_text_gives_its_first_line_with_a_word_and_long_lines_are_cut():
    assert result_line("\n```\nhello world\nmore\n") == "hello world"
    assert result_line("{ not json\nsecond") == "{ not json"
    cut = result_line("x" * 300, limit=50)
    assert len(cut) == 50 and cut.endswith("…")
    assert result_line("") == "" and result_line("  \n ") == ""
