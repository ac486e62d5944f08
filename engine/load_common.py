"""What the loaders share (engine/loader.py, engine/tokenizer_load.py): the one error a failed
load raises, its one-line message, the switch to our own networks and tokenizer, and silencing
transformers while it loads."""
from __future__ import annotations

import contextlib
import os


class ModelLoadError(RuntimeError):
    """A checkpoint that cannot be loaded; str() is one line naming the problem."""


def use_native(native: bool | None) -> bool:
    """Our own Qwen module (engine/models/qwen.py) unless turned off: native=False, or
    CLOVER_NATIVE_MODELS=0 in the environment when native is None."""
    if native is not None:
        return native
    return os.environ.get("CLOVER_NATIVE_MODELS", "1").strip().lower() not in ("0", "false", "no", "off")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else exc.__class__.__name__


@contextlib.contextmanager
def quiet_transformers():
    """transformers' progress bars off and its log at errors only while it loads (see
    engine/loader.py's load_model), both restored afterwards; imports transformers, so only the
    paths that use it enter this."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
