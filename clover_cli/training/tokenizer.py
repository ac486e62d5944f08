"""Train the byte-level BPE tokenizer of the bundled model and write HF tokenizer files.

The tokenizer is trained with the `tokenizers` library on local Python source. Digits are split
one per token so that line numbers and counts are copied digit by digit (an easier copy task).

Copy-invariant pre-tokenization: a name must become the *same* tokens wherever it appears — in
the user's sentence (after a space), in a JSON string argument (after a quote), in a tool result
(after a colon or at a line start). GPT-2-style byte-level BPE attaches the leading space to the
word (" parse" vs "parse") and merges quotes and brackets into punctuation runs ('"__'), so the
first bundled model had to learn a separate mapping for every token it copied, and copied
nothing (0% exact arguments after 4.8M tokens). Here whitespace runs and the characters in
ISOLATE are pre-tokens of their own, so copying a name is copying token ids — the task induction
heads solve (Olsson et al. 2022).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator

SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<think>", "</think>", "<|pad|>",
)
TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")
# characters that never merge with their neighbours (quotes, backtick, brackets, separators)
ISOLATE = "\"'`()[]{},:;"


def chat_template() -> str:
    """The ChatML chat template (tools in a system section, Qwen-style tool calls/results)."""
    return TEMPLATE_PATH.read_text(encoding="utf-8")


def _texts(files: Iterable[Path], max_bytes: int) -> Iterator[str]:
    total = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        total += len(text)
        yield text
        if total >= max_bytes:
            return


def train_tokenizer(files: Iterable[Path], vocab_size: int = 4096, max_bytes: int = 8_000_000,
                    extra_texts: Iterable[str] = ()):
    """Train a byte-level BPE on the given source files; returns a `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from tokenizers import Regex

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), behavior="isolated"),
        pre_tokenizers.Split(Regex("[" + re.escape(ISOLATE) + "]"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)

    def stream() -> Iterator[str]:
        yield from _texts(files, max_bytes)
        yield from extra_texts

    tok.train_from_iterator(stream(), trainer=trainer)
    return tok


def save_hf_tokenizer(tok, out_dir: Path, model_max_length: int = 4096):
    """Write tokenizer.json, tokenizer_config.json (with the chat template) and
    special_tokens_map.json; returns the loaded `transformers` fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>", pad_token="<|pad|>",
        unk_token=None, mask_token="<|mask|>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS
                                   if t not in ("<|im_end|>", "<|pad|>", "<|mask|>")],
        model_max_length=model_max_length, clean_up_tokenization_spaces=False)
    fast.chat_template = chat_template()
    from clover_cli.training.modeling import save_tokenizer

    save_tokenizer(fast, out_dir)
    return fast


def write_special_map(out_dir: Path) -> None:
    """special_tokens_map.json for readers that want it."""
    path = out_dir / "special_tokens_map.json"
    data = {"eos_token": "<|im_end|>", "pad_token": "<|pad|>", "mask_token": "<|mask|>",
            "additional_special_tokens": [t for t in SPECIAL_TOKENS
                                          if t not in ("<|im_end|>", "<|pad|>", "<|mask|>")]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def load_tokenizer(path: Path):
    """Load the HF tokenizer from a model/tokenizer directory."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))

