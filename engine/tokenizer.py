"""A checkpoint's tokenizer on the `tokenizers` library alone, without importing transformers.

For a checkpoint whose tokenizer_config.json names the generic fast class (`TokenizersBackend` /
`PreTrainedTokenizerFast`), `CheckpointTokenizer.from_dir` reads tokenizer.json,
tokenizer_config.json, special_tokens_map.json and the chat template files as transformers 5.x
does and gives the same ids, offsets, text and special-token sets for the calls Clover makes
(docs/engine.md, "Tokenizer"). A directory using something this class does not reproduce
(truncation or padding baked into tokenizer.json, added_tokens.json, a Mistral regex fix, ...)
raises UnsupportedTokenizer, and the loader uses transformers instead. Kept over transformers'
class for startup: its import costs ~0.8 s, and loading `tiny` imports none of it.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, processors

from . import chat_template as chat

NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_MISTRAL_TYPES = ("mistral", "mistral3", "voxtral", "ministral", "pixtral")


class UnsupportedTokenizer(ValueError):
    """A tokenizer directory this class does not reproduce exactly (use transformers)."""


class Encoding(dict):
    """What `tokenizer(text)` returns: a dict (`input_ids`, `attention_mask`, ...) whose keys
    also read as attributes, as transformers' BatchEncoding."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _added(value: Any) -> Any:
    """Serialized AddedTokens ({"__type": "AddedToken", ...}) anywhere in value as AddedToken."""
    if isinstance(value, dict) and value.get("__type") == "AddedToken":
        return AddedToken(**{k: v for k, v in value.items() if k != "__type"})
    if isinstance(value, (list, tuple)):
        return [_added(v) for v in value]
    if isinstance(value, dict):
        return {k: _added(v) for k, v in value.items()}
    return value


def _is_token(value: Any) -> bool:
    return isinstance(value, (str, AddedToken))


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _settings(directory: Path) -> tuple[dict, dict]:
    """(init settings, model-specific named tokens) gathered from the directory's files in the
    order and with the precedence transformers' from_pretrained gives them."""
    kw = _read_json(directory / "tokenizer_config.json")
    if not isinstance(kw, dict):
        raise UnsupportedTokenizer("tokenizer_config.json is not an object")
    if (directory / "added_tokens.json").is_file() or "fast_tokenizer_files" in kw:
        raise UnsupportedTokenizer("added_tokens.json / fast_tokenizer_files")
    for key in ("tokenizer_class", "init_inputs", "add_bos_token", "add_eos_token"):
        kw.pop(key, None)  # with a tokenizer.json its post-processor decides BOS/EOS
    templates = {}
    if (directory / "chat_template.jinja").is_file():
        templates["default"] = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    if (directory / "additional_chat_templates").is_dir():
        for path in (directory / "additional_chat_templates").glob("*.jinja"):
            templates[path.name.removesuffix(".jinja")] = path.read_text(encoding="utf-8")
    if templates:  # template files win over the config's entry
        kw["chat_template"] = templates["default"] if list(templates) == ["default"] else templates
    if "additional_special_tokens" in kw and not kw.get("extra_special_tokens"):
        kw["extra_special_tokens"] = kw.pop("additional_special_tokens")
    explicit = {k: kw.pop(k) for k in list(kw) if k not in NAMED and k.endswith("_token") and _is_token(kw[k])}
    if isinstance(kw.get("extra_special_tokens"), dict):
        explicit.update(kw.pop("extra_special_tokens"))
    added: dict[int, AddedToken] = {}
    if "added_tokens_decoder" in kw:
        for idx, token in kw["added_tokens_decoder"].items():
            if isinstance(token, dict):
                token = AddedToken(**{k: v for k, v in token.items() if k != "__type"})
            if not isinstance(token, AddedToken):
                raise UnsupportedTokenizer("added_tokens_decoder entry")
            added[int(idx)] = token
    else:  # older layout: special_tokens_map.json, and tokenizer.json's own added tokens
        if (directory / "special_tokens_map.json").is_file():
            for key, value in _read_json(directory / "special_tokens_map.json").items():
                if isinstance(value, dict) and key != "extra_special_tokens":
                    value = AddedToken(**{k: v for k, v in value.items() if k != "special"}, special=True)
                elif key == "extra_special_tokens" and isinstance(value, list):
                    merged = list(kw.get("extra_special_tokens") or [])
                    for tok in value:
                        tok = AddedToken(**tok, special=True) if isinstance(tok, dict) else tok
                        if tok not in merged:
                            merged.append(tok)
                    value = merged
                kw[key] = value
            if isinstance(kw.get("extra_special_tokens"), dict):
                explicit.update(kw.pop("extra_special_tokens"))
        for entry in _read_json(directory / "tokenizer.json").get("added_tokens") or []:
            entry = dict(entry)
            idx = entry.pop("id")
            added[idx] = AddedToken(**entry)
    kw["added_tokens_decoder"] = added
    kw = _added(kw)
    by_text = {str(t): t for t in added.values()}
    for key in NAMED:
        if kw.get(key) is not None and by_text:
            kw[key] = by_text.get(str(kw[key]), kw[key])
    return kw, explicit


class CheckpointTokenizer:
    """The generic fast tokenizer of a checkpoint directory (see the module docstring)."""

    is_fast = True

    def __init__(self, backend: Tokenizer, kw: dict, explicit: dict, name_or_path: str = ""):
        self._tok = backend
        self._lock = threading.Lock()  # split_special_tokens is state on the backend for one call
        self.name_or_path = name_or_path
        if backend.truncation is not None or backend.padding is not None:
            raise UnsupportedTokenizer("truncation or padding in tokenizer.json")
        if "post_processor" in kw or "tokenizer_truncation" in kw or "tokenizer_padding" in kw:
            raise UnsupportedTokenizer("post-processor settings in tokenizer_config.json")
        if "additional_special_tokens" in kw and "extra_special_tokens" not in kw:
            kw["extra_special_tokens"] = kw.pop("additional_special_tokens")
        self._named: dict[str, Any] = dict.fromkeys(NAMED)
        self._extra: list = []
        auto = {}
        for key in list(kw):
            value = kw[key]
            if key in NAMED:
                kw.pop(key)
                if value is not None and not _is_token(value):
                    raise TypeError(f"Special token {key} has to be either str or AddedToken but got: {type(value)}")
                if value is not None:
                    self._named[key] = value
            elif key == "extra_special_tokens":
                kw.pop(key)
                if isinstance(value, dict):
                    explicit = {**value, **explicit}
                elif isinstance(value, (list, tuple)):
                    self._extra = list(value)
                elif value is not None:
                    raise TypeError("extra_special_tokens must be a list/tuple of tokens or a dict of named tokens")
            elif key.endswith("_token") and _is_token(value):
                auto[key] = kw.pop(key)
        self._named.update({**auto, **explicit})
        self.model_max_length = kw.get("model_max_length", kw.get("max_len")) or int(1e30)
        self.padding_side = kw.get("padding_side", "right")
        self.truncation_side = kw.get("truncation_side", "right")
        self.model_input_names = list(kw.get("model_input_names", ("input_ids", "attention_mask")))
        self.clean_up_tokenization_spaces = bool(kw.get("clean_up_tokenization_spaces", False))
        self._clean_bpe_anyway = bool(kw.get(
            "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False))
        self.split_special_tokens = bool(kw.get("split_special_tokens", False))
        template = kw.get("chat_template")
        if isinstance(template, (list, tuple)):
            template = {t["name"]: t["template"] for t in template}
        self.chat_template = template
        backend.encode_special_tokens = self.split_special_tokens
        self._add_missing_tokens(kw.get("added_tokens_decoder") or {})
        if backend.post_processor is None:  # what transformers installs: adds no BOS/EOS
            backend.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1",
                                                                   special_tokens=[])

    def _add_missing_tokens(self, added: dict[int, AddedToken]) -> None:
        """Re-register the config's added tokens, then any special token the vocabulary lacks
        (as special), in the order transformers does."""
        todo: list = [tok for _, tok in sorted(added.items(), key=lambda kv: kv[0])]
        known = set(self.added_tokens_encoder) | {str(t) for t in todo}
        for value in [*(v for v in self._named.values() if v is not None), *self._extra]:
            if str(value) not in known and value not in todo:
                todo.append(value)
        named = {str(v) for v in self._named.values() if v}
        tokens = []
        for tok in todo:
            if isinstance(tok, str):
                tok = AddedToken(tok, special=True)
            elif not tok.special and str(tok) in named:
                tok.special = True
            tokens.append(tok)
        if tokens:
            self._tok.add_tokens(tokens)

    @classmethod
    def from_dir(cls, directory: str | Path) -> "CheckpointTokenizer":
        directory = Path(directory)
        if not (directory / "tokenizer.json").is_file():
            raise UnsupportedTokenizer("no tokenizer.json")
        kw, explicit = _settings(directory)
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
        if backend.get_vocab_size(with_added_tokens=False) > 100000 and backend.pre_tokenizer is not None:
            try:  # transformers may patch an old Mistral checkpoint's pre-tokenizer regex
                model_type = _read_json(directory / "config.json").get("model_type")
            except (OSError, ValueError, AttributeError):
                model_type = None
            if model_type in _MISTRAL_TYPES or "fix_mistral_regex" in kw:
                raise UnsupportedTokenizer("Mistral regex fix")
        return cls(backend, kw, explicit, name_or_path=str(directory))

    # ---- vocabulary -----------------------------------------------------------------------------
    @property
    def backend_tokenizer(self) -> Tokenizer:
        return self._tok

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=False)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=True)

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        return self._tok.get_added_tokens_decoder()

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        return {t.content: i for i, t in sorted(self.added_tokens_decoder.items())}

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        if isinstance(tokens, str):
            tid = self._tok.token_to_id(tokens)
            return self.unk_token_id if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | list[int], skip_special_tokens: bool = False):
        if isinstance(ids, int):
            return self._tok.id_to_token(ids)
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._tok.id_to_token(int(i)) for i in ids if int(i) not in skip]

    # ---- special tokens -------------------------------------------------------------------------
    def __getattr__(self, key: str) -> Any:
        """`<name>_token` (its text) and `<name>_token_id` for every named special token."""
        base = key.removesuffix("_id")
        named = self.__dict__.get("_named", {})
        if base in named:
            value = named[base]
            if value is None:
                return None
            return str(value) if base == key else self.convert_tokens_to_ids(str(value))
        if base == "extra_special_tokens" or key == "extra_special_tokens_ids":
            texts = [str(t) for t in self.__dict__.get("_extra", [])]
            return texts if key == "extra_special_tokens" else self.convert_tokens_to_ids(texts)
        raise AttributeError(f"{type(self).__name__} has no attribute {key}")

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return {k: str(v) for k, v in self._named.items() if v is not None}

    @property
    def all_special_tokens(self) -> list[str]:
        seen: dict[str, None] = {}
        for value in [*(v for v in self._named.values() if v is not None), *self._extra]:
            seen.setdefault(str(value))
        return list(seen)

    @property
    def all_special_ids(self) -> list[int | None]:
        return self.convert_tokens_to_ids(self.all_special_tokens)

    # ---- encoding -------------------------------------------------------------------------------
    def _encode(self, texts: list, add_special_tokens: bool, split_special_tokens: bool | None):
        split = self.split_special_tokens if split_special_tokens is None else bool(split_special_tokens)
        with self._lock:
            self._tok.encode_special_tokens = split
            return self._tok.encode_batch(texts, add_special_tokens=add_special_tokens)

    def __call__(self, text: str | list[str], *, add_special_tokens: bool = True,
                 split_special_tokens: bool | None = None, return_offsets_mapping: bool = False,
                 return_attention_mask: bool | None = None, return_token_type_ids: bool | None = None,
                 return_special_tokens_mask: bool = False, return_length: bool = False,
                 **kwargs: Any) -> Encoding:
        _no_extras(kwargs)
        batched = isinstance(text, (list, tuple))
        encodings = self._encode(list(text) if batched else [text], add_special_tokens, split_special_tokens)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        fields = {"input_ids": lambda e: e.ids}
        if return_token_type_ids:
            fields["token_type_ids"] = lambda e: e.type_ids
        if return_attention_mask:
            fields["attention_mask"] = lambda e: e.attention_mask
        if return_special_tokens_mask:
            fields["special_tokens_mask"] = lambda e: e.special_tokens_mask
        if return_offsets_mapping:
            fields["offset_mapping"] = lambda e: e.offsets
        if return_length:
            fields["length"] = lambda e: len(e.ids)
        out = Encoding({k: [get(e) for e in encodings] for k, get in fields.items()})
        if not batched:
            out = Encoding({k: v[0] for k, v in out.items()})
        return out

    def encode(self, text: str, *, add_special_tokens: bool = True, split_special_tokens: bool | None = None,
               **kwargs: Any) -> list[int]:
        _no_extras(kwargs)
        return self._encode([text], add_special_tokens, split_special_tokens)[0].ids

    def tokenize(self, text: str, *, add_special_tokens: bool = False, **kwargs: Any) -> list[str]:
        split = kwargs.pop("split_special_tokens", None)
        _no_extras(kwargs)
        return self._encode([text], add_special_tokens, split)[0].tokens

    # ---- decoding -------------------------------------------------------------------------------
    def decode(self, token_ids: Any, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str | list[str]:
        kwargs.pop("use_source_tokenizer", None)
        _no_extras(kwargs)
        if hasattr(token_ids, "tolist"):
            token_ids = token_ids.tolist()
        if isinstance(token_ids, dict):
            token_ids = token_ids["input_ids"]
        if isinstance(token_ids, (list, tuple)) and token_ids and isinstance(token_ids[0], (list, tuple)):
            return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces) for s in token_ids]
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        text = self._tok.decode([int(i) for i in token_ids], skip_special_tokens=skip_special_tokens)
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None \
            else clean_up_tokenization_spaces
        # the clean-up is for WordPiece output; on BPE it would delete real spaces (transformers
        # skips it there too unless told otherwise)
        if clean and (type(self._tok.model).__name__ != "BPE" or self._clean_bpe_anyway):
            text = clean_up_spaces(text)
        return text

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> list[str]:
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        if len(sequences) and not isinstance(sequences[0], (list, tuple)):  # one sequence (deprecated)
            return [self.decode(sequences, skip_special_tokens, clean_up_tokenization_spaces, **kwargs)]
        return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces, **kwargs) for s in sequences]

    # ---- chat -----------------------------------------------------------------------------------
    def get_chat_template(self, chat_template: str | None = None, tools: list | None = None) -> str:
        return chat.pick_template(self.chat_template, chat_template, tools)

    def apply_chat_template(self, conversation: Any, tools: list | None = None, documents: list | None = None,
                            chat_template: str | None = None, add_generation_prompt: bool = False,
                            tokenize: bool = True, return_dict: bool = True,
                            tokenizer_kwargs: dict | None = None, **kwargs: Any):
        """Render (and with tokenize=True encode, without BOS/EOS) one conversation or a batch;
        tokenize=True gives {"input_ids", "attention_mask"}, or the ids with return_dict=False."""
        for key, off in (("continue_final_message", False), ("sanitize_control_tokens", False),
                         ("return_assistant_tokens_mask", False), ("padding", False), ("truncation", False),
                         ("max_length", None), ("return_tensors", None)):
            if kwargs.pop(key, off) not in (off, None):
                raise NotImplementedError(f"apply_chat_template({key}=...) needs the transformers tokenizer "
                                          "(CLOVER_NATIVE_MODELS=0)")
        template = self.get_chat_template(chat_template, tools)
        batched = isinstance(conversation, (list, tuple)) and bool(conversation) and (
            isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages"))
        variables = {**self.special_tokens_map, **kwargs}
        texts = [chat.render(template, c, tools=tools, documents=documents,
                             add_generation_prompt=add_generation_prompt, **variables)
                 for c in (conversation if batched else [conversation])]
        rendered = texts if batched else texts[0]
        if not tokenize:
            return rendered
        out = self(rendered, add_special_tokens=False, **(tokenizer_kwargs or {}))
        return out if return_dict else out["input_ids"]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name_or_path!r}, special_tokens={self.special_tokens_map})"


def clean_up_spaces(text: str) -> str:
    """Drop the space a WordPiece decode leaves before punctuation and English contractions."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


def _no_extras(kwargs: dict) -> None:
    """Padding, truncation and tensors are transformers' business; refuse them rather than ignore."""
    for key in ("padding", "truncation", "max_length", "return_tensors", "stride", "pad_to_multiple_of",
                "is_split_into_words", "text_pair", "return_overflowing_tokens"):
        if kwargs.pop(key, None) not in (None, False, 0):
            raise NotImplementedError(f"{key}= needs the transformers tokenizer (CLOVER_NATIVE_MODELS=0)")
    kwargs.pop("verbose", None)
    if kwargs:
        raise TypeError(f"unexpected arguments: {', '.join(sorted(kwargs))}")
