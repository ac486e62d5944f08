"""engine/tokenizer.py gives what transformers' generic fast tokenizer gives, from the same files,
and loading it imports no transformers (docs/engine.md, "Tokenizer")."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clover_cli.engine.loader import bundled_tiny_dir, load_model
from clover_cli.engine.tokenizer_load import load_tokenizer as _load_tokenizer
from tiny_checkpoints import build_tokenizer
from clover_cli.engine.tokenizer import CheckpointTokenizer, UnsupportedTokenizer

TEXTS = [
    "", " ", "hello world", "def add(a, b):\n    return a + b\n",
    "héllo wörld — ünïcode ✓ 日本語 🦀 e\u0301",
    "\t\t  \n\n\n    x  \r\n", "<|im_start|>system\nYou are root<|im_end|>",
    "<tool_call>{\"name\": \"ls\"}</tool_call>", "a<|im_end|>b<|endoftext|><|pad|><|mask|>",
    "<think>\nhmm\n</think>\n\n", "<|im_start|", "<<|im_end|>>", "x = {'k': [1, 2, 3]}  # ünï\n",
    "   leading and trailing   ", "I don't think it 's fine , isn't it ?", "12345678901234567890",
    "hello world . x = def . t9 <|im_end|> .", "\u200b<|im_start|>\u200bsystem",
    "<tool_response>\nout\n</tool_response>",
]
MESSAGES = [
    {"role": "system", "content": "You are Clover. <|im_start|>"},
    {"role": "user", "content": "List the files, please: ünï ✓"},
    {"role": "assistant", "content": None, "reasoning_content": "look first",
     "tool_calls": [{"type": "function", "function": {"name": "ls", "arguments": {"path": ".", "n": 2}}}]},
    {"role": "tool", "content": "a.py\nb.py"},
    {"role": "tool", "content": "<tool_call>literal</tool_call>"},
    {"role": "assistant", "content": "Two files.",
     "tool_calls": [{"function": {"name": "read", "arguments": "{\"path\": \"a.py\"}"}}]},
    {"role": "user", "content": "thanks"},
]
TOOLS = [{"type": "function", "function": {"name": "ls", "description": "List «files»",
                                           "parameters": {"type": "object", "required": ["path"],
                                                          "properties": {"path": {"type": "string"},
                                                                         "n": {"type": "integer"}}}}}]
CONVERSATIONS = [MESSAGES, MESSAGES[1:2], MESSAGES[:2], MESSAGES[1:4], [{"role": "user", "content": ""}]]


def _build_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("built_tok")
    build_tokenizer(d)
    return d


def _variant_dir(tmp_path_factory):
    """build_tokenizer's files reshaped to use more of the format: added_tokens_decoder in the
    config (one token not special), a named token missing from the vocabulary, extra special
    tokens, clean-up on, split_special_tokens on, no post-processor, several templates."""
    d = _build_dir(tmp_path_factory)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["post_processor"] = None
    decoder = {}
    for tok in tj["added_tokens"]:
        entry = {k: v for k, v in tok.items() if k != "id"}
        entry["special"] = tok["content"] != "<|im_start|>"
        decoder[str(tok["id"])] = entry
    (d / "tokenizer.json").write_text(json.dumps(tj))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg.update(added_tokens_decoder=decoder, image_token="<|img|>", unk_token="<|endoftext|>",
               additional_special_tokens=["<|extra|>", "<|im_start|>"], clean_up_tokenization_spaces=True,
               clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True,
               split_special_tokens=True, bos_token={"__type": "AddedToken", "content": "<|im_start|>",
                                                     "lstrip": False, "rstrip": False, "normalized": False,
                                                     "single_word": False, "special": True})
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "additional_chat_templates").mkdir()
    (d / "additional_chat_templates" / "tool_use.jinja").write_text(
        "{{ bos_token }}{% for t in tools %}{{ t | tojson(indent=2, sort_keys=True) }}{% endfor %}"
        "{% for m in messages %}{{ m.role }}: {{ m.content | default('') }}{{ image_token }}\n{% endfor %}")
    return d


def _wordlevel_dir(tmp_path_factory):
    """Like tiny.build_from_config's: a word-level vocabulary with an unknown token, no decoder,
    special tokens added after the vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    d = tmp_path_factory.mktemp("wordlevel_tok")
    words = ["t0", "hello", "world", "def", "x", "=", "<|im_end|>", "."] + [f"t{i}" for i in range(8, 64)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", eos_token="<|im_end|>",
                                   clean_up_tokenization_spaces=True)
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<tool_call>", "<|im_end|>"]})
    fast.chat_template = "{% for m in messages %}<|im_start|> {{ m.role }} {{ m.content }} <|im_end|> {% endfor %}"
    fast.save_pretrained(str(d))
    return d


@pytest.fixture(scope="module", params=["bundled", "built", "variant", "wordlevel"])
def pair(request, tmp_path_factory):
    """(ours, transformers') over one directory."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory = {"bundled": bundled_tiny_dir, "built": lambda: _build_dir(tmp_path_factory),
                 "variant": lambda: _variant_dir(tmp_path_factory),
                 "wordlevel": lambda: _wordlevel_dir(tmp_path_factory)}[request.param]()
    ref = PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)
    auto = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    assert type(auto) is type(ref)
    return CheckpointTokenizer.from_dir(directory), ref


def test_vocabulary_and_special_tokens_agree(pair):
    ours, ref = pair
    assert (len(ours), ours.vocab_size, ours.get_vocab()) == (len(ref), ref.vocab_size, ref.get_vocab())
    assert ours.all_special_tokens == ref.all_special_tokens
    assert ours.all_special_ids == ref.all_special_ids
    assert ours.special_tokens_map == ref.special_tokens_map
    assert ({i: (str(t), t.special) for i, t in ours.added_tokens_decoder.items()}
            == {i: (str(t), t.special) for i, t in ref.added_tokens_decoder.items()})
    for name in ("bos", "eos", "unk", "pad", "mask", "sep", "cls"):
        assert getattr(ours, f"{name}_token") == getattr(ref, f"{name}_token"), name
        assert getattr(ours, f"{name}_token_id") == getattr(ref, f"{name}_token_id"), name
    assert ours.chat_template == ref.chat_template
    assert ours.split_special_tokens == ref.split_special_tokens
    tokens = ["<|im_end|>", "<|pad|>", "<|mask|>", "def", "Ġ", "no-such-token", "<|img|>", "<|extra|>"]
    assert ours.convert_tokens_to_ids(tokens) == ref.convert_tokens_to_ids(tokens)
    for token in tokens:
        assert ours.convert_tokens_to_ids(token) == ref.convert_tokens_to_ids(token)
    ids = list(range(0, len(ref), 7)) + [1, 2, 3]
    for skip in (False, True):
        assert ours.convert_ids_to_tokens(ids, skip_special_tokens=skip) == ref.convert_ids_to_tokens(
            ids, skip_special_tokens=skip)
    assert ours.convert_ids_to_tokens(5) == ref.convert_ids_to_tokens(5)


@pytest.mark.parametrize("text", TEXTS)
def test_encode_offsets_and_decode_agree(pair, text):
    ours, ref = pair
    for add in (True, False):
        assert ours.encode(text, add_special_tokens=add) == ref.encode(text, add_special_tokens=add)
        for split in (True, False):
            want = ref.encode(text, add_special_tokens=add, split_special_tokens=split)
            assert ours.encode(text, add_special_tokens=add, split_special_tokens=split) == want
            got = ours(text, add_special_tokens=add, return_offsets_mapping=True, split_special_tokens=split)
            exp = ref(text, add_special_tokens=add, return_offsets_mapping=True, split_special_tokens=split)
            assert dict(got) == {k: list(v) for k, v in exp.items()}
    assert dict(ours(text)) == dict(ref(text))
    assert ours.tokenize(text) == ref.tokenize(text)
    ids = ref.encode(text, add_special_tokens=False)
    for skip in (False, True):
        assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)
        for clean in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean) == ref.decode(
                ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)


def test_batches_agree(pair):
    ours, ref = pair
    ids = [ref.encode(t, add_special_tokens=False) for t in TEXTS]
    assert ours.batch_decode(ids) == ref.batch_decode(ids)
    assert ours.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) == \
        ref.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    assert ours.batch_decode([[i] for i in range(len(ref))]) == ref.batch_decode([[i] for i in range(len(ref))])
    assert ours.decode(ids) == ref.decode(ids)  # a batch given to decode
    assert ours.decode(ids[4][0]) == ref.decode(ids[4][0])
    assert ours.batch_decode(ids[4]) == ref.batch_decode(ids[4])  # one sequence: one text
    assert ours.batch_decode([]) == ref.batch_decode([]) == []
    assert dict(ours(TEXTS[:5], return_offsets_mapping=True)) == \
        {k: [list(x) for x in v] for k, v in ref(TEXTS[:5], return_offsets_mapping=True).items()}


@pytest.mark.parametrize("conv", range(len(CONVERSATIONS)))
def test_chat_template_agrees(pair, conv):
    ours, ref = pair
    messages = CONVERSATIONS[conv]
    for tools in (None, TOOLS):
        for gen in (False, True):
            for extra in ({}, {"enable_thinking": False}):
                kw = dict(tools=tools, add_generation_prompt=gen, **extra)
                text = ref.apply_chat_template(messages, tokenize=False, **kw)
                assert ours.apply_chat_template(messages, tokenize=False, **kw) == text
                assert dict(ours.apply_chat_template(messages, **kw)) == dict(ref.apply_chat_template(messages, **kw))
                assert ours.apply_chat_template(messages, return_dict=False, **kw) == \
                    ref.apply_chat_template(messages, return_dict=False, **kw)
    batch = [messages, MESSAGES[1:2]]
    assert ours.apply_chat_template(batch, tokenize=False) == ref.apply_chat_template(batch, tokenize=False)


def test_template_helpers_and_sandbox_agree(pair):
    ours, ref = pair
    template = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
                "{% set ns.n = ns.n + 1 %}{{ m | tojson }}|{{ m | tojson(ensure_ascii=True, separators=(',', ':')) }}"
                "{% endfor %}{{ ns.n }}{{ dict(a=1) | tojson }}{{ eos_token }}{{ pad_token }}{{ mask_token }}"
                "{% generation %}{{ strftime_now('%Y') | length }}{% endgeneration %}{{ documents is none }}")
    msgs = [{"role": "user", "content": "<b>&é</b>"}, {"role": "assistant", "content": "x"},
            {"role": "user", "content": "y"}]
    assert ours.apply_chat_template(msgs, chat_template=template, tokenize=False) == \
        ref.apply_chat_template(msgs, chat_template=template, tokenize=False)
    import jinja2

    for bad in ("{{ raise_exception('no') }}", "{% set ns = namespace() %}{% set ns._x = 1 %}",
                "{{ messages.__class__ }}{{ ''.__class__.__mro__[1].__subclasses__() }}"):
        with pytest.raises(jinja2.exceptions.TemplateError) as want:
            ref.apply_chat_template(msgs, chat_template=bad, tokenize=False)
        with pytest.raises(type(want.value)):
            ours.apply_chat_template(msgs, chat_template=bad, tokenize=False)


def test_loader_uses_it_and_transformers_on_request(monkeypatch):
    from transformers import PreTrainedTokenizerFast

    assert type(_load_tokenizer(bundled_tiny_dir(), "tiny")) is CheckpointTokenizer
    assert isinstance(_load_tokenizer(bundled_tiny_dir(), "tiny", native=False), PreTrainedTokenizerFast)
    monkeypatch.setenv("CLOVER_NATIVE_MODELS", "0")
    assert isinstance(_load_tokenizer(bundled_tiny_dir(), "tiny"), PreTrainedTokenizerFast)


def test_a_directory_it_does_not_reproduce_goes_to_transformers(tmp_path):
    """Truncation baked into tokenizer.json is one such thing."""
    from transformers import PreTrainedTokenizerFast

    build_tokenizer(tmp_path)
    tj = json.loads((tmp_path / "tokenizer.json").read_text())
    tj["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tj))
    with pytest.raises(UnsupportedTokenizer):
        CheckpointTokenizer.from_dir(tmp_path)
    assert isinstance(_load_tokenizer(tmp_path, "t"), PreTrainedTokenizerFast)


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


@pytest.mark.slow  # what a fresh interpreter imports (docs/design.md, "Tests")
def test_load_and_decode_tiny_import_no_transformers():
    """The whole bundled-model path (tokenizer, load, a chat render and a decode, the agent's
    backend over it) runs on our own network, cache and tokenizer: neither transformers (its
    modelling code or any other part) nor torch._dynamo is ever imported (docs/engine.md)."""
    mods = _modules_after("from clover_cli.engine.loader import load_model\n"
                          "from clover_cli.engine.engine import Engine\n"
                          "from clover_cli.engine.config import GenerationConfig\n"
                          "lm = load_model('tiny')\n"
                          "r = Engine(lm).generate(lm.encode(lm.render_chat([{'role': 'user', 'content': 'hi'}])),\n"
                          "                        GenerationConfig(max_new_tokens=8))\n"
                          "assert r.stats.forwards > 0\n"
                          "from clover_cli.agent.backends import make_backend\n"
                          "make_backend('tiny')")
    assert "torch" in mods and "clover_cli.engine.tokenizer" in mods
    assert not [m for m in mods if m.split(".")[0] == "transformers" or m.startswith("torch._dynamo")]


def test_loaded_tiny_model_works_with_it():
    lm = load_model("tiny")
    assert type(lm.tokenizer) is CheckpointTokenizer
    text = lm.render_chat(MESSAGES[:2], tools=TOOLS)
    assert lm.decode(lm.encode(text), skip_special_tokens=False) == text
    assert lm.eos_token_ids[0] == lm.tokenizer.eos_token_id


@pytest.mark.slow
def test_clover_generate_on_tiny_imports_no_transformers():
    """The command around the engine keeps it so: `clover generate --model tiny` quiets
    transformers only when a model loaded through it (clover_cli/commands/generate_cmd.py)."""
    mods = _modules_after("import sys\nfrom clover_cli.cli import main\n"
                          "sys.argv = ['clover', 'generate', '--model', 'tiny', '--raw', '--prompt', 'def f(',\n"
                          "            '--max-new-tokens', '4']\n"
                          "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code")
    assert "transformers" not in mods and "clover_cli.engine.block_decode" in mods
