"""The token ids the model generated for each completion, kept for the next prompt (prefix reuse,
docs/agent.md "Prompt prefix").

Re-tokenizing an answer's text can give other ids than the model wrote (a byte-level tokenizer
merges differently than the model chose), and then the next prompt stops being a token prefix
extension of the last one, and the engine's cache of that prompt cannot be reused past the
answer. The in-process backend keeps each completion's ids here, keyed by the exact text the
agent stores as the assistant message; clover_cli/agent/encode.py splices them back in.
"""
from __future__ import annotations

from array import array
from collections import OrderedDict
from typing import Any, Iterable, Sequence

MAX_ENTRIES = 256  # completions remembered (the most recently used are kept)
MAX_TOKENS = 1_000_000  # ids remembered in all: 4 MB as int32


class KeptIds:
    """text -> the model's ids for it; least recently used first out, bounded by the number of
    entries and the number of ids. Calling it looks a text up (None when not kept)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_tokens: int = MAX_TOKENS) -> None:
        self.max_entries, self.max_tokens = max_entries, max_tokens
        self._items: OrderedDict[str, array] = OrderedDict()
        self._tokens = 0

    def __call__(self, text: str) -> array | None:
        ids = self._items.get(text)
        if ids is not None:
            self._items.move_to_end(text)
        return ids

    def __len__(self) -> int:
        return len(self._items)

    @property
    def tokens(self) -> int:
        return self._tokens

    def put(self, text: str, ids: Iterable[int]) -> None:
        packed = array("i", ids)
        if not text or not packed or len(packed) > self.max_tokens:
            return
        old = self._items.pop(text, None)
        self._tokens -= len(old) if old is not None else 0
        self._items[text] = packed
        self._tokens += len(packed)
        while len(self._items) > self.max_entries or self._tokens > self.max_tokens:
            _, dropped = self._items.popitem(last=False)
            self._tokens -= len(dropped)

    def clear(self) -> None:
        self._items.clear()
        self._tokens = 0


def completion_ids(tokenizer: Any, generated: Sequence[int], text: str, opened: str,
                   eos_ids: Iterable[int]) -> list[int] | None:
    """The ids that stand for `text` (the completion as the agent stores it) in the next prompt:
    the generated ids without the trailing EOS (the template writes its own end of turn), after
    the ids of `opened` (thinking markup the template opened in the prompt and the backend put in
    front of the text). None when they do not decode to exactly `text` (a stop string cut the
    text, a hidden id inside, a tokenizer that does not round-trip): then the text is encoded."""
    ids = list(generated)
    stops = set(eos_ids)
    while ids and ids[-1] in stops:
        ids.pop()
    if opened:
        ids = list(tokenizer.encode(opened, add_special_tokens=False)) + ids
    if not ids or not text:
        return None
    try:
        decoded = tokenizer.decode(ids, skip_special_tokens=False)
    except Exception:  # an id the tokenizer cannot decode: not kept
        return None
    return ids if decoded == text else None
