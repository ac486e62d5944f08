"""The held-out evaluation asks in phrasings the training templates never used."""
from __future__ import annotations


def test_novel_phrasings_are_not_training_templates():
    from clover_cli.engine.training import transcripts
    from clover_cli.engine.training.evaluation_hooks import NOVEL_PHRASES

    reqs = transcripts.requests()
    for kind, phrases in NOVEL_PHRASES.items():
        trained = {p.lower() for p in reqs[kind]["phrases"]}
        for p in phrases:
            assert p.lower() not in trained, (kind, p)


def test_call_prompts_reword_the_request_and_keep_the_expected_call(tok):
    from clover_cli.engine.training.evaluation_hooks import NOVEL_PHRASES, call_prompts

    rec = {"kind": "define", "x": "parse_header", "tool": "grep",
           "arguments": {"pattern": "(def|class) parse_header"}, "root": "/r",
           "messages": [{"role": "user", "content": "where is parse_header defined?"},
                        {"role": "assistant", "content": ""},
                        {"role": "tool", "content": "x"},
                        {"role": "assistant", "content": "done"}]}
    plain = call_prompts(tok, 1, 0, [rec])[0]
    novel = call_prompts(tok, 1, 0, [rec], novel=True)[0]
    assert "where is parse_header defined?" in plain[0]
    assert "where is parse_header defined?" not in novel[0]
    assert any(p.replace("{X}", "parse_header") in novel[0] for p in NOVEL_PHRASES["define"])
    assert novel[1:] == plain[1:] == ("grep", {"pattern": "(def|class) parse_header"})
    assert rec["messages"][0]["content"] == "where is parse_header defined?"  # not mutated
