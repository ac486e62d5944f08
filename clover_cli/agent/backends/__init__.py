"""Model backends behind one interface, chosen by the model spec (docs/engine.md)."""
from __future__ import annotations

import inspect

from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend, NativeToolCall

# Options a command passes whatever the spec turns out to be (it learns the kind only from the
# spec): every backend kind accepts them, and a kind they mean nothing to ignores them.
#   threshold    every kind (the engine's commit threshold; the others keep it for display)
#   cache_mb     the in-process engine's prefix-reuse memory; ignored by openai and replay
#   api_key_env  the openai backend's key variable; ignored by the engine and replay
#   device, dtype  where the in-process engine runs (engine/placement.py); ignored by the others
#   request_timeout  the openai backend's total deadline per request; ignored by the others
#   quantize     the in-process engine's weight format (engine/quantize.py); ignored by the others
COMMON_OPTIONS = ("threshold", "cache_mb", "api_key_env", "device", "dtype", "request_timeout", "quantize")
_MEANINGFUL = {"engine": ("threshold", "cache_mb", "device", "dtype", "quantize"),
               "openai": ("threshold", "api_key_env", "request_timeout"),
               "replay": ("threshold",)}


def _own_options(cls) -> set[str]:
    """The keyword options a backend class's constructor declares (its specific ones included)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"self"}


def make_backend(spec, *, threshold: float | None = None, cache_mb: float | None = None,
                 api_key_env: str | None = None, device: str | None = None, dtype: str | None = None,
                 request_timeout: float | None = None, quantize: str | None = None,
                 **specific: object) -> ModelBackend:
    """The backend for a model spec: `tiny`, a directory, `hf:ORG/NAME`, `smollm2` (in-process
    engine), `openai:BASE_URL#MODEL`, `replay:FILE`. Raises SpecError for a bad spec and
    BackendError when the model cannot be loaded or reached; both print as one line.

    `threshold`, `cache_mb` and `api_key_env` are taken for every kind (COMMON_OPTIONS); any other
    option must be one the chosen backend declares (engine: `lm`, `device`, `temperature`, ...;
    openai: `timeout`, `retries`, ...; replay: `chunk_chars`, `delay`, ...), else TypeError names
    it: a misspelled option is never dropped without a word."""
    from clover_cli.engine.spec import ModelSpec, parse_spec

    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)  # typed specs pass as they are
    if parsed.kind == "replay":
        from clover_cli.agent.backends.replay import ReplayBackend as cls
        kind, args = "replay", (parsed.value,)
    elif parsed.kind == "openai":
        from clover_cli.agent.backends.openai_backend import OpenAIBackend as cls
        kind, args = "openai", (parsed.value, parsed.model)
    else:
        from clover_cli.agent.backends.engine_backend import EngineBackend as cls
        kind, args = "engine", (parsed,)
    allowed = _own_options(cls) - set(COMMON_OPTIONS) - {"spec", "path", "base_url", "model"}
    unknown = sorted(set(specific) - allowed)
    if unknown:
        raise TypeError(f"make_backend: option {unknown[0]!r} is not one the {kind} backend takes "
                        f"(its own: {', '.join(sorted(allowed))}; every kind: {', '.join(COMMON_OPTIONS)})")
    common = {"threshold": threshold, "cache_mb": cache_mb, "api_key_env": api_key_env,
              "device": device, "dtype": dtype, "request_timeout": request_timeout, "quantize": quantize}
    opts = {k: v for k, v in common.items() if k in _MEANINGFUL[kind] and v is not None}
    return cls(*args, **opts, **specific)


__all__ = ["make_backend", "COMMON_OPTIONS", "ModelBackend", "BackendError", "Completion", "NativeToolCall"]
