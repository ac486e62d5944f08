"""Token healing for raw-text completions.

A prompt that ends inside what the tokenizer would merge into one token puts the model off its
training distribution. The bundled tokenizer merges a newline with the next line's indentation
(`"\\n    "` is one token), so a code prefix ending in `"\\n"` ends in a bare newline token that,
in training, only ever preceded a line at column 0: the bundled model answered
`def fibonacci(n): ... return n\\n` with a top-level `# n == n ...` instead of an indented line.

Healing backs the prompt up by its last token and constrains the first generated token to one
whose text starts with the removed text; what the model writes then continues the prompt exactly
as typed, and the removed text is not shown again. The idea is Guidance's "token healing"
(Lundberg, microsoft/guidance, 2023); this is our own implementation for both decoders.

Only raw completions heal (`GenerationConfig.token_healing`): a chat template's prompt ends with
the same tokens its training transcripts had, so there is nothing to heal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_TEXTS_ATTR = "_clover_token_texts"


@dataclass(frozen=True)
class Healing:
    """A healed prompt: `prompt_ids` lacks the original's last token, whose text is `prefix`;
    the first generated token must be one of `allowed` (bool [V]), each starting with `prefix`."""

    prompt_ids: tuple[int, ...]
    prefix: str
    allowed: torch.Tensor

    def constrain(self, row: torch.Tensor) -> torch.Tensor:
        """Logits [V'] of the first generated position -> a copy with disallowed tokens at -inf
        (V' may exceed the tokenizer's vocabulary: padded embedding rows are never allowed)."""
        out = torch.full_like(row, float("-inf"))
        n = min(row.shape[-1], self.allowed.shape[0])
        keep = self.allowed[:n].to(row.device)
        out[:n] = torch.where(keep, row[:n], out[:n])
        return out


def token_texts(tokenizer: Any) -> list[str]:
    """The text of every token id on its own ("" for special tokens), computed once per tokenizer."""
    cached = getattr(tokenizer, _TEXTS_ATTR, None)
    if cached is not None:
        return cached
    size = len(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special |= {i for i, t in added.items() if getattr(t, "special", False)}
    texts = tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    texts = ["" if i in special else t for i, t in enumerate(texts)]
    try:
        setattr(tokenizer, _TEXTS_ATTR, texts)
    except AttributeError:  # a tokenizer object that refuses attributes: recompute next time
        pass
    return texts


def heal_prompt(lm, prompt_ids: list[int]) -> Healing | None:
    """The healed form of prompt_ids, or None when there is nothing to heal: a prompt of one
    token, a special last token, a last token that is part of a multi-byte character, or one
    that no other token begins with (healing would change nothing)."""
    if len(prompt_ids) < 2:
        return None
    texts = token_texts(lm.tokenizer)
    last = int(prompt_ids[-1])
    if not 0 <= last < len(texts):
        return None
    prefix = texts[last]
    if not prefix or "\ufffd" in prefix:
        return None
    allowed = torch.tensor([bool(t) and t.startswith(prefix) for t in texts], dtype=torch.bool)
    if int(allowed.sum()) <= 1:  # only the token itself: the prompt is already as healed as it gets
        return None
    return Healing(tuple(int(i) for i in prompt_ids[:-1]), prefix, allowed)
