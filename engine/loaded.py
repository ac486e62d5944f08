"""What a load returns: a model, its tokenizer and what the engine needs to know about them."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .families import Family
from .load_common import ModelLoadError
from .placement import Placement


@dataclass
class LoadedModel:
    """A model, its tokenizer and what the engine needs to know about them."""

    name: str
    model: Any  # a transformers PreTrainedModel in eval mode
    tokenizer: Any
    family: Family
    path: Path | None = None
    eos_token_ids: tuple[int, ...] = ()
    context_window: int = 4096
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_diffusion(self) -> bool:
        return self.family.is_diffusion

    @property
    def block_size(self) -> int:
        return self.family.block_size if self.family.is_diffusion else 1

    @property
    def mask_token_id(self) -> int | None:
        return self.family.mask_token_id

    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def placement(self) -> Placement:
        """Where the model runs (engine/placement.py): chosen at load, else read off its weights."""
        chosen = self.extra.get("placement")
        if chosen is not None:
            return chosen
        param = next(self.model.parameters())
        device = str(param.device) if param.device.type != "cuda" else f"cuda:{param.device.index or 0}"
        return Placement(device, str(param.dtype).replace("torch.", ""),
                         "CPU" if device == "cpu" else device)

    @property
    def template_supports_tools(self) -> bool:
        template = getattr(self.tokenizer, "chat_template", None) or ""
        if isinstance(template, dict):
            template = " ".join(str(v) for v in template.values())
        return "tools" in template

    def render_chat(self, messages: list[dict], tools: list[dict] | None = None,
                    add_generation_prompt: bool = True, **template_kwargs: Any) -> str:
        """Render messages with the tokenizer's chat template (tools= when it supports them)."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelLoadError(f"{self.name}: tokenizer has no chat template; use --raw")
        kwargs: dict[str, Any] = dict(tokenize=False, add_generation_prompt=add_generation_prompt)
        if tools and self.template_supports_tools:
            kwargs["tools"] = tools
        kwargs.update(template_kwargs)
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_raw(self, text: str) -> list[int]:
        """Tokenize as the tokenizer's own encode does (its BOS, if it adds one, included)."""
        return list(self.tokenizer.encode(text))

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
