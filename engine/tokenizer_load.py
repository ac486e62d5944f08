"""The checkpoint's tokenizer, loaded without running its code (engine/loader.py): our own
implementation of the generic fast class (engine/tokenizer.py, no transformers import) when it
reproduces the directory, else transformers' classes with trust_remote_code=False."""
from __future__ import annotations

import json
from pathlib import Path

from .load_common import ModelLoadError, one_line, quiet_transformers, use_native


def load_tokenizer(directory: Path, name: str, native: bool | None = None):
    """The checkpoint's tokenizer without its code. The generic fast class on our own
    implementation (engine/tokenizer.py, no transformers import) unless native is off (see
    use_native) or the directory uses what it does not reproduce; else AutoTokenizer with
    trust_remote_code=False (which refuses rather than asks), else, when tokenizer_config.json
    names a class that lives in the checkpoint's own Python file, the generic fast tokenizer
    over its tokenizer.json."""
    generic = _generic_fast_tokenizer(directory)
    if generic and use_native(native):
        from .tokenizer import CheckpointTokenizer

        try:
            return CheckpointTokenizer.from_dir(directory)
        except Exception:  # noqa: BLE001 - unsupported or broken: transformers below decides
            pass
    with quiet_transformers():
        return _load_hf_tokenizer(directory, name, generic)


def _load_hf_tokenizer(directory: Path, name: str, generic: bool):
    from transformers import PreTrainedTokenizerFast

    if generic:  # skips AutoTokenizer's config and class lookups (~0.5 s)
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True,
                                                           trust_remote_code=False)
        except Exception:  # noqa: BLE001 - AutoTokenizer below says what is wrong
            pass
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(directory), local_files_only=True,
                                             trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        first = exc
    if (directory / "tokenizer.json").is_file():
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True,
                                                           trust_remote_code=False)
        except Exception:  # noqa: BLE001
            pass
    raise ModelLoadError(f"{name}: cannot load tokenizer without running checkpoint code: "
                         f"{one_line(first)}")


def _generic_fast_tokenizer(directory: Path) -> bool:
    """tokenizer.json with tokenizer_config.json naming the generic fast class, which is what
    AutoTokenizer would build too (a model-specific class stays with AutoTokenizer)."""
    if not (directory / "tokenizer.json").is_file():
        return False
    try:
        cfg = json.loads((directory / "tokenizer_config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(cfg, dict) and cfg.get("tokenizer_class") in ("TokenizersBackend",
                                                                     "PreTrainedTokenizerFast")
