"""Token ids for a conversation in which untrusted text stays text (docs/security.md).

The prompt comes from clover_cli/agent/render.py as segments. The template's own text is encoded
as usual, so its role markers become the special tokens they are. A message's content (a file, a
tool result, AGENTS.md, the user's text) is encoded with the tokenizer's `split_special_tokens`,
so a literal `<|im_start|>system` in it becomes the ordinary pieces of those characters, never
the role token. The model's own earlier output keeps the call and thinking markup it wrote
(`<tool_call>`, `</tool_call>`, `<think>`, `</think>`) as tokens; everything else in it is split.

A prompt whose contents hold no special-token text (the usual case) is encoded in one piece,
exactly as before; only when the offsets show a special id made from a content's characters is
the prompt encoded segment by segment.

Defence in depth: each content segment's ids are checked; should a special id still appear (a
tokenizer that ignores `split_special_tokens`, a role token registered as a non-special added
token), the text is re-encoded with a zero-width space after the first character of every such
token's text, and any id still special is dropped.

The model's own ids (prefix reuse, docs/agent.md "Prompt prefix"): a "model" segment whose text is
a completion the backend kept (`kept(text)`: the ids the model generated for exactly that text)
is spliced in as those ids instead of being re-encoded, so the next prompt starts with the
previous prompt and the previous answer token for token. The template text and contents between
such segments are encoded in runs, each as above. Kept ids are used only when none of them is a
special id other than the call/thinking markup (`keepable`); otherwise the text is encoded as any
other model segment, so a stray `<|im_start|>` the model wrote never becomes a role token here.
"""
from __future__ import annotations

import re
import threading
from typing import Any, Callable, Sequence

from clover_cli.agent.render import Segment, render_segments

# Gemma 4's native call tokens too (clover_cli/agent/gemma_calls.py)
MODEL_MARKUP = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<|tool_call>", "<tool_call|>", '<|"|>')
_MARKUP_RE = re.compile("(" + "|".join(re.escape(t) for t in MODEL_MARKUP) + ")")
_ZWSP = "\u200b"
# `split_special_tokens` toggles state on the shared tokenizer for one call: one call at a time
_LOCK = threading.Lock()


def special_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of every special token, including added tokens flagged special."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or ())
    for tid, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(tok, "special", False):
            ids.add(int(tid))
    return frozenset(ids)


def _special_texts(tokenizer: Any) -> list[str]:
    texts = set(getattr(tokenizer, "all_special_tokens", None) or ())
    for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        texts.add(str(tok))
    return sorted((t for t in texts if t), key=len, reverse=True)


def _plain(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def encode_text(tokenizer: Any, text: str, forbidden: frozenset[int] | None = None) -> list[int]:
    """Ids for untrusted `text`: no id in `forbidden` (default: every special id) can result."""
    forbidden = special_ids(tokenizer) if forbidden is None else forbidden
    try:
        ids = list(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))
    except TypeError:  # a tokenizer without the option
        ids = _plain(tokenizer, text)
    if not forbidden.intersection(ids):
        return ids
    neutral = text
    for token in _special_texts(tokenizer):
        if len(token) > 1 and token in neutral:
            neutral = neutral.replace(token, token[0] + _ZWSP + token[1:])
    return [i for i in _plain(tokenizer, neutral) if i not in forbidden]


def _joint_if_safe(tokenizer: Any, segments: list[Segment], forbidden: frozenset[int],
                   markup: frozenset[int]) -> list[int] | None:
    """The whole prompt encoded in one piece, exactly as before, when no special id in it comes
    from a content's characters (checked with the offsets); None when one does (or the tokenizer
    gives no offsets), and then the segments are encoded one by one."""
    text = "".join(s.text for s in segments)
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
    except (TypeError, KeyError, NotImplementedError, ValueError):
        return None
    if len(ids) != len(offsets):
        return None
    spans, pos = [], 0
    for seg in segments:
        if seg.kind != "template":
            spans.append((pos, pos + len(seg.text), seg.kind))
        pos += len(seg.text)
    for tid, (start, end) in zip(ids, offsets):
        if tid not in forbidden:
            continue
        for a, b, kind in spans:
            if start < b and end > a and not (kind == "model" and tid in markup and a <= start and end <= b):
                return None
    return ids


Kept = Callable[[str], "Sequence[int] | None"]


def keepable(ids: Sequence[int], forbidden: frozenset[int], markup: frozenset[int]) -> bool:
    """True when the model's own ids may stand in the prompt as they are: no special id but the
    single-token call/thinking markup (an EOS has been cut off by the backend already)."""
    return bool(ids) and not any(i in forbidden and i not in markup for i in ids)


def _encode_run(tokenizer: Any, segments: list[Segment], forbidden: frozenset[int],
                markup_ids: dict[str, list[int]], allowed: frozenset[int]) -> list[int]:
    if not segments:
        return []
    joint = _joint_if_safe(tokenizer, segments, forbidden, allowed)
    if joint is not None:
        return joint
    ids: list[int] = []
    for seg in segments:
        if seg.kind == "template":
            ids += _plain(tokenizer, seg.text)
        elif seg.kind == "text":
            ids += encode_text(tokenizer, seg.text, forbidden)
        else:
            for piece in _MARKUP_RE.split(seg.text):
                if piece in markup_ids:
                    ids += markup_ids[piece]
                elif piece:
                    ids += encode_text(tokenizer, piece, forbidden)
    return ids


def encode_segments(tokenizer: Any, segments: list[Segment], kept: Kept | None = None) -> list[int]:
    """Ids for rendered segments: template text as is, contents with special tokens split. A
    prompt whose contents hold no special-token text is encoded whole, token for token as the
    plain encoding of its text (no change at the segment boundaries). With `kept`, a model
    segment the backend kept ids for is spliced in as those ids, and the runs between such
    segments are encoded each on its own, in the same way."""
    forbidden = special_ids(tokenizer)
    markup_ids = {t: _plain(tokenizer, t) for t in MODEL_MARKUP}
    allowed = frozenset(i for v in markup_ids.values() if len(v) == 1 for i in v)
    ids: list[int] = []
    run: list[Segment] = []
    with _LOCK:
        for seg in segments:
            own = kept(seg.text) if kept is not None and seg.kind == "model" else None
            if own is not None and keepable(own, forbidden, allowed):
                ids += _encode_run(tokenizer, run, forbidden, markup_ids, allowed)
                ids += own
                run = []
            else:
                run.append(seg)
        ids += _encode_run(tokenizer, run, forbidden, markup_ids, allowed)
    return ids


def encode_conversation(lm: Any, messages: list[dict], tools: list[dict],
                        kept: Kept | None = None) -> tuple[str, list[int]]:
    """(prompt text, token ids) for a LoadedModel `lm`; see the module docstring."""
    segments = render_segments(lm, messages, tools)
    text = "".join(s.text for s in segments)
    return text, encode_segments(lm.tokenizer, segments, kept)
