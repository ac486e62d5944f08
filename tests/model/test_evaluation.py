"""The held-out evaluation asks in phrasings the training templates never used."""
from __future__ import annotations

import re


def test_novel_phrasings_are_not_training_templates():
    from clover_cli.training import transcripts
    from clover_cli.training.evaluation_hooks import NOVEL_PHRASES

    reqs = transcripts.requests()
    for kind, phrases in NOVEL_PHRASES.items():
        trained = {p.lower() for p in reqs[kind]["phrases"] + reqs[kind].get("more_phrases", [])}
        for p in phrases:
            assert p.lower() not in trained, (kind, p)
    # nor can a wrapped training phrasing (greeting + template + sign-off) be a held-out one
    wrap = reqs["wrap"]
    for kind, phrases in NOVEL_PHRASES.items():
        novel = {p.lower() for p in phrases}
        for t in reqs[kind]["phrases"] + reqs[kind].get("more_phrases", []):
            for pre in [""] + wrap["prefix"]:
                for post in [""] + wrap["suffix"]:
                    assert (pre + t + post).lower() not in novel, (kind, pre, t, post)


_FILLER = {"thanks", "thx", "pls", "hey", "hi", "ok", "so", "hmm", "the", "a",
           "an"}


def _gist(phrase: str) -> str:
    """A phrasing with case, punctuation, contractions and filler words removed: two phrasings
    with the same gist differ only in politeness or word order of fillers."""
    words = re.findall(r"[a-z{}]+", phrase.lower().replace("'s", " is").replace("{x}", " {x} "))
    return " ".join(w for w in words if w not in _FILLER)


def test_novel_phrasings_are_not_near_copies_of_training_templates():
    """Held-out phrasings (the evaluation's and the bench's) stay unseen in gist, not just
    verbatim, with or without a training greeting or sign-off: "what's in the {X} folder?" and
    "What is in {X} folder, thanks" share one."""
    import json
    from pathlib import Path

    from clover_cli import prompts
    from clover_cli.training import transcripts
    from clover_cli.training.evaluation_hooks import NOVEL_PHRASES

    reqs = transcripts.requests()
    wrap = reqs["wrap"]
    trained = {_gist(pre + t + post) for kind in NOVEL_PHRASES
               for t in reqs[kind]["phrases"] + reqs[kind].get("more_phrases", [])
               for pre in [""] + wrap["prefix"] for post in [""] + wrap["suffix"]}
    bench = json.loads((Path(prompts.__file__).parent / "bench_prompts.json").read_text())
    bench_novel = [c["request"].replace(c["arg"], "{X}") for c in bench["agent"]
                   if c["request"] in ("Where is the class RetryPolicy defined?",
                                       "which files are in the folder scripts?",
                                       "what is in the directory src/plugins?")]
    assert len(bench_novel) == 3
    for p in [p for ps in NOVEL_PHRASES.values() for p in ps] + bench_novel:
        assert _gist(p) not in trained, p
    assert _gist("what's in the {X} folder?") == _gist("What is in {X} folder, thanks")


def test_user_text_wraps_some_requests_and_keeps_the_name():
    import random

    from clover_cli.training import transcripts

    rng = random.Random(3)
    texts = [transcripts.user_text(rng, "define", "parse_header") for _ in range(400)]
    assert all("parse_header" in t for t in texts)
    spec = transcripts.requests()["define"]
    plain = {p.replace("{X}", "parse_header") for p in spec["phrases"] + spec["more_phrases"]}
    wrapped = [t for t in texts if t not in plain]
    assert 0.3 < len(wrapped) / len(texts) < 0.6  # p = 0.25 for each side
    assert any(t.startswith(tuple(transcripts.requests()["wrap"]["prefix"])) for t in wrapped)
    assert any(t.endswith(tuple(transcripts.requests()["wrap"]["suffix"])) for t in wrapped)
    assert any(t.replace("parse_header", "{X}") in spec["more_phrases"] for t in texts)
    # the evaluation's draw: original templates only, never wrapped
    narrow = [transcripts.user_text(rng, "define", "parse_header", wide=False) for _ in range(100)]
    assert set(narrow) <= {p.replace("{X}", "parse_header") for p in spec["phrases"]}


def test_call_prompts_reword_the_request_and_keep_the_expected_call(tok):
    from clover_cli.training.evaluation_hooks import NOVEL_PHRASES, call_prompts

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


def test_copy_positions_scores_a_perfect_copier_and_a_constant_model(tok):
    """The teacher-forced copy probe gives 1.0 at every position to a model that predicts the
    true token, and 0.0 to one that always predicts a token no name contains."""
    import torch

    from clover_cli.training import curriculum, evaluation_hooks
    from clover_cli.training.data import chat_example

    class Fake(torch.nn.Module):
        def __init__(self, oracle: bool):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.oracle = oracle
            self.config = type("C", (), {"mask_token_id": tok.mask_token_id})()

        def forward(self, input_ids, **kw):
            n = input_ids.shape[1] // 2
            clean = input_ids[0, n:]  # the clean half holds the true tokens
            logits = torch.zeros(1, 2 * n, len(tok))
            target = clean if self.oracle else torch.full_like(clean, tok.pad_token_id)
            logits[0, torch.arange(n), target] = 10.0
            return type("O", (), {"logits": logits})()

    import random
    ex = chat_example(tok, curriculum.copy_chat(random.Random(11), tok))
    assert sum(ex.loss_ok) >= 2
    good = evaluation_hooks.copy_positions(Fake(True), tok, 10, 11, positions=3)
    bad = evaluation_hooks.copy_positions(Fake(False), tok, 10, 11, positions=3)
    assert good == [1.0, 1.0, 1.0] and bad == [0.0, 0.0, 0.0]
    # the vocabulary-word copy probe: whole names, every position right or the name fails
    assert evaluation_hooks.word_copy(Fake(True), tok, 12, 1) == 1.0
    assert evaluation_hooks.word_copy(Fake(False), tok, 12, 1) == 0.0
    assert evaluation_hooks.word_copy(Fake(True), tok, 12, 1, compound=True) == 1.0
    assert evaluation_hooks.word_copy(Fake(False), tok, 12, 1, compound=True) == 0.0
    # and the compound probe copies names whose vocabulary part is two words run together
    from clover_cli.training import names
    words = {w for w in names.vocab_words(tok) if w.islower() and len(w) > 2}
    asked: list[str] = []

    class Spy(evaluation_hooks._One):
        def __init__(self, name):
            asked.append(name)
            super().__init__(name)

    def two_words(part: str) -> bool:
        return any(part[:i] in words and part[i:] in words for i in range(3, len(part) - 2))

    original = evaluation_hooks._One
    evaluation_hooks._One = Spy
    try:
        evaluation_hooks.word_copy(Fake(True), tok, 20, 1, compound=True)
        compound_names = list(asked)
        asked.clear()
        evaluation_hooks.word_copy(Fake(True), tok, 20, 1)
    finally:
        evaluation_hooks._One = original
    assert len(compound_names) == 20 and all(
        any(two_words(p) for p in n.split("_")) for n in compound_names), compound_names
    assert sum(any(p in words for p in n.split("_")) for n in asked) == 20
    assert sum(any(two_words(p) for p in n.split("_")) for n in asked) < 10


def test_engine_generator_decodes_like_the_trainers_decoder(bundled_dir, tok):
    """evaluate_dir decodes through the engine: the same call as the trainer's uncached
    bd_generate (cached vs recomputed float32 logits may break a late near-tie, so the first 24
    tokens are compared), in no more forwards (the engine stops at the first EOS)."""
    import torch
    from transformers import AutoModelForCausalLM

    from clover_cli.training.evaluate import bd_generate
    from clover_cli.training.evaluation_hooks import call_prompts, engine_generator

    model = AutoModelForCausalLM.from_pretrained(str(bundled_dir), dtype=torch.float32).eval()
    mask_id, eos = int(model.config.mask_token_id), (tok.convert_tokens_to_ids("<|im_end|>"),)
    generate = engine_generator(str(bundled_dir))
    total = ref_total = 0
    for prompt, _, _ in call_prompts(tok, 3, 4242):
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        ref, ref_forwards = bd_generate(model, ids, mask_id, eos, 32, max_new=48)
        out, forwards = generate(model, ids, mask_id, eos, 32, max_new=48)
        assert len(ref) > 24 and out[:24] == ref[:24]
        total, ref_total = total + forwards, ref_total + ref_forwards
    assert 0 < total <= ref_total


def test_parse_call_reads_calls_as_the_agent_does():
    from clover_cli.training.evaluation_hooks import parse_call

    good = '<tool_call>{"name": "grep", "arguments": {"pattern": "(def|class) f"}}</tool_call>'
    stray = '<tool_call>{"name": "grep", "arguments": {"pattern": "(def|class) f"}}}</tool_call>'
    cut = '<tool_call>{"name": "read_file", "arguments": {"path": "a.py'
    want = ("grep", {"pattern": "(def|class) f"})
    assert parse_call(good) == want and parse_call(good, strict=True) == want
    # a stray brace after the object: the agent runs the call, the strict reading rejects it
    assert parse_call(stray) == want and parse_call(stray, strict=True) is None
    assert parse_call(cut) == ("read_file", {"path": "a.py"}) and parse_call(cut, strict=True) is None
    assert parse_call("just an answer") is None
    assert parse_call('<tool_call>{"name": "grep", "arguments": "x"}</tool_call>') is None


def test_call_accuracy_counts_strict_and_agent_readings(tok):
    from clover_cli.training.evaluation_hooks import call_accuracy

    body = '<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}}</tool_call><|im_end|>'
    ids = tok(body, add_special_tokens=False)["input_ids"]

    def fake(model, prompt_ids, mask_id, eos, block_size, max_new, threshold):
        return ids, 4

    class M:
        class config:
            mask_token_id = 3

    res = call_accuracy(M, tok, [("p", "grep", {"pattern": "x"}), ("p", "grep", {"pattern": "y"})],
                        32, generate=fake)
    assert res["call_valid"] == 1.0 and res["call_exact"] == 0.5
    assert res["call_exact_strict"] == 0.0
    assert res["tpf"] == len(ids) / 4


def test_answer_grounding_needs_every_fact_of_the_reference(tok):
    """An answer is grounded when it states the reference answer's files and numbers; the
    prompt is the conversation up to the real tool result."""
    from clover_cli.training.evaluation_hooks import answer_grounding

    def rec(ref: str) -> dict:
        return {"messages": [
            {"role": "user", "content": "where is apply_discount defined?"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "grep", "arguments": {"pattern": "(def|class) apply_discount"}}}]},
            {"role": "tool", "content": "shop/prices.py:3:def apply_discount(p):"},
            {"role": "assistant", "content": ref}]}

    recs = [rec("apply_discount is defined in shop/prices.py at line 3."),
            rec("No definition found.")]  # states no fact: skipped
    seen: list[str] = []

    class M:
        class config:
            mask_token_id = tok.mask_token_id

    def fake(say):
        def generate(model, ids, mask_id, eos, block_size, max_new=48, threshold=0.95):
            seen.append(tok.decode(ids))
            return tok(say, add_special_tokens=False)["input_ids"], 1
        return generate

    good = answer_grounding(M, tok, recs, 32, generate=fake("It is in shop/prices.py, line 3."))
    assert good["answer_grounded"] == 1.0 and good["answer_n"] == 1
    assert "shop/prices.py:3:def apply_discount" in seen[0]  # the real result is in the prompt
    assert seen[0].rstrip().endswith("<|im_start|>assistant")
    assert "apply_discount is defined in" not in seen[0]  # the reference answer is not
    for wrong in ("It is in shop/prices.py.", "It is in shop/other.py at line 3."):
        assert answer_grounding(M, tok, recs, 32, generate=fake(wrong))["answer_grounded"] == 0.0


def test_bench_novel_phrasings_stay_out_of_training():
    """`clover bench` asks three requests in phrasings no training template (or wrapped template)
    uses; widening the templates must not teach them."""
    import json
    from pathlib import Path

    from clover_cli import prompts
    from clover_cli.training import transcripts

    reqs = transcripts.requests()
    wrap = reqs["wrap"]
    trained = {(pre + t + post).lower()
               for kind in ("show", "define", "uses", "list", "tests")
               for t in reqs[kind]["phrases"] + reqs[kind].get("more_phrases", [])
               for pre in [""] + wrap["prefix"] for post in [""] + wrap["suffix"]}
    bench = json.loads((Path(prompts.__file__).parent / "bench_prompts.json").read_text())
    templates = {c["request"].replace(c["arg"], "{X}") for c in bench["agent"]}
    novel = {"Where is the class {X} defined?", "which files are in the folder {X}?",
             "what is in the directory {X}?"}
    assert novel <= templates
    for t in novel:
        assert t.lower() not in trained, t


def test_trainers_decoder_never_decodes_after_a_committed_eos():
    """bd_generate follows the engine's rule: once a block's EOS is committed, the positions
    after it are never selected, and the block ends when everything before the EOS is committed.
    The scripted model is sure of an EOS at the second position, unsure of the first, and more
    sure of every position after the EOS than of the first (the old rule picked those first)."""
    from types import SimpleNamespace

    import torch

    from clover_cli.training.evaluate import bd_generate

    V, MASK, EOS, TOK = 16, 3, 2, 7
    prompt = [5] * 10  # the block is positions 0-31; generation starts at 10

    class Scripted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, attention_mask=None, use_cache=False):
            L = input_ids.shape[1]
            logits = torch.zeros(1, L, V)
            logits[0, :, TOK] = 3.0   # after the EOS: conf ~0.58
            logits[0, 10, TOK] = 2.0  # the first position: conf ~0.35, the least sure
            logits[0, 11, :] = 0.0
            logits[0, 11, EOS] = 20.0  # committed at the first step
            return SimpleNamespace(logits=logits)

    out, forwards = bd_generate(Scripted(), prompt, MASK, (EOS,), block_size=32, max_new=22)
    assert out == [TOK, EOS]
    assert forwards == 2  # EOS at step 1, the first position at step 2; nothing after the EOS
