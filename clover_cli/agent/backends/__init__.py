"""Model backends behind one interface, chosen by the model spec (docs/engine.md)."""
from __future__ import annotations

from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend, NativeToolCall


def make_backend(spec, **opts: object) -> ModelBackend:
    """The backend for a model spec: `tiny`, a directory, `hf:ORG/NAME`, `smollm2` (in-process
    engine), `openai:BASE_URL#MODEL`, `replay:FILE`. Raises SpecError for a bad spec and
    BackendError when the model cannot be loaded or reached; both print as one line."""
    from clover_cli.engine.spec import ModelSpec, parse_spec

    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)  # typed specs pass as they are
    if parsed.kind == "replay":
        from clover_cli.agent.backends.replay import ReplayBackend
        return ReplayBackend(parsed.value, **opts)
    if parsed.kind == "openai":
        from clover_cli.agent.backends.openai_backend import OpenAIBackend
        return OpenAIBackend(parsed.value, parsed.model, **opts)
    from clover_cli.agent.backends.engine_backend import EngineBackend
    return EngineBackend(parsed, **opts)


__all__ = ["make_backend", "ModelBackend", "BackendError", "Completion", "NativeToolCall"]
