"""Copy-invariant tokenization: a name is the same token ids in every context it is copied
between (user sentence, JSON argument, tool output, answer). Without this the model has to learn
a separate ' name' -> 'name' mapping for every token it copies (the first bundled model copied
0% of names)."""
from __future__ import annotations

import pytest

NAMES = ["parse_args", "src/cli.py", "__init__.py", "HTTPServer", "load_v2", "a.b.c"]
CONTEXTS = [
    "where is {X} defined?",
    "show me {X}",
    "find uses of `{X}` please",
    '{{"name": "grep", "arguments": {{"pattern": "def {X}"}}}}',
    '{{"path": "{X}"}}',
    "src/mod.py:12:def {X}(argv):",
    "{X} is defined in pkg/x.py, line 3.",
    "({X}, {X})",
]


def _contains(seq: list[int], sub: list[int]) -> bool:
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def _check(tok) -> None:
    for name in NAMES:
        alone = tok(name, add_special_tokens=False)["input_ids"]
        for ctx in CONTEXTS:
            ids = tok(ctx.format(X=name), add_special_tokens=False)["input_ids"]
            assert _contains(ids, alone), (name, ctx, [tok.decode([i]) for i in ids])


@pytest.fixture(scope="module")
def fresh_tok(tmp_path_factory):
    """A small tokenizer trained here with the project's recipe."""
    from clover_cli.training import tokenizer as T

    texts = [c.format(X=n) for n in NAMES for c in CONTEXTS] * 20
    texts += ["def parse(self, args):\n    return self.args\n"] * 50
    out = tmp_path_factory.mktemp("tok")
    return T.save_hf_tokenizer(T.train_tokenizer([], vocab_size=400, extra_texts=texts), out)


def test_trained_tokenizer_is_copy_invariant(fresh_tok):
    _check(fresh_tok)


def test_bundled_tokenizer_is_copy_invariant(tok):
    _check(tok)


def test_whitespace_and_quotes_are_their_own_tokens(fresh_tok):
    pieces = [fresh_tok.decode([i]) for i in
              fresh_tok('x = "parse_args"', add_special_tokens=False)["input_ids"]]
    assert pieces[:2] == ["x", " "]
    assert pieces.count('"') == 2
