"""Keeping the conversation inside the model's context window.

First old tool outputs are elided (the most recent ones stay), then the model itself summarises
the older part (compaction). The system prompt, the user's task and the latest state survive both.
"""
from __future__ import annotations

from clover_cli.agent.prompt_files import observation


def truncate_output(text: str, max_chars: int, key: str = "truncated") -> str:
    """Cuts a long tool output to its head and tail with a note (observation `key`) in between."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    note = observation(key, omitted=omitted, head=head, tail=tail)
    return f"{text[:head]}\n{note}\n{text[-tail:]}"


def what_is(messages: list[dict], i: int) -> str:
    """How a cut notice names message `i`: "your message", "an earlier message", "the read_file
    output", "an earlier answer"."""
    role = messages[i].get("role")
    if role == "tool":
        return f"the {messages[i].get('name', 'tool')} output"
    if role == "assistant":
        return "an earlier answer"
    last_user = max((k for k, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return "your message" if i == last_user else "an earlier message"


def cut_to_fit(messages: list[dict], over: int, tokens: int, protect: int = 1) -> tuple[int, int, int] | None:
    """Shortens the longest message after the first `protect` ones (head and tail kept, a note in
    the middle) by about `over` tokens of the `tokens` the conversation takes; returns (index,
    characters before, after), or None when no message is long enough to cut (docs/agent.md,
    "Context window")."""
    sizes = [(len(str(m.get("content") or "")), k) for k, m in enumerate(messages) if k >= protect]
    if not sizes:
        return None
    size, i = max(sizes)
    if size < 400:
        return None
    chars = sum(len(str(m.get("content") or "")) for m in messages) or 1
    per_token = max(1.0, chars / max(1, tokens))
    # The margin is on what is kept, not on what is removed: cutting 90% of a dense paste with a
    # margin on the removal leaves nothing. An undercut is caught by the caller's next count.
    target = int((size - over * per_token) * 0.95) - 200  # the note itself takes ~200 characters
    target = max(200, min(target, size * 9 // 10))
    content = str(messages[i].get("content") or "")
    messages[i] = {**messages[i], "content": truncate_output(content, target, "cut_to_fit"), "cut": True}
    return i, size, len(messages[i]["content"])


def elide_tool_outputs(messages: list[dict], keep_recent: int, min_chars: int = 200) -> int:
    """Replaces all but the last `keep_recent` long tool outputs with a note; returns how many."""
    tool_idx = [i for i, m in enumerate(messages) if m.get("role") == "tool" and not m.get("elided")]
    count = 0
    for i in tool_idx[:max(0, len(tool_idx) - keep_recent)]:
        content = messages[i].get("content") or ""
        if len(content) < min_chars:
            continue
        messages[i] = {**messages[i], "content": observation(
            "elided", name=messages[i].get("name", "tool"), chars=len(content)), "elided": True}
        count += 1
    return count


def tail_start(messages: list[dict]) -> int:
    """Index where the latest state begins: the last assistant message after the last user
    message (with its tool results), else the last user message."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    last_asst = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return last_asst if last_asst > last_user else last_user


def cut_until_fits(messages: list[dict], count, budget: int) -> list[tuple[str, int, int]]:
    """Cuts the longest messages (never the first) until `count()` tokens are within `budget` or
    nothing is long enough to cut; returns (what was cut, characters before, after), one per
    message, for the notices."""
    cuts: dict[int, tuple[str, int, int]] = {}
    for _ in range(64):
        tokens = count()
        if tokens <= budget:
            break
        labels = [what_is(messages, i) for i in range(len(messages))]
        cut = cut_to_fit(messages, tokens - budget, tokens)
        if cut is None:
            break
        i, before, after = cut
        cuts[i] = (labels[i], cuts.get(i, ("", before, 0))[1], after)
    return list(cuts.values())


def compacted(messages: list[dict], summary: str, task: str) -> list[dict]:
    """The conversation after compaction: system prompt, summary (+ the task verbatim), latest state."""
    system = [m for m in messages[:1] if m.get("role") == "system"]
    body = messages[len(system):]
    tail = body[tail_start(body):]
    text = observation("compaction_summary", summary=summary.strip()) if summary.strip() else \
        observation("compaction_dropped")
    if task and not any(m.get("role") == "user" and m.get("content") == task for m in tail):
        text += "\n\n" + observation("compaction_task", task=task)
    summary_msg = {"role": "user", "content": text, "compaction": True, "summary": text}
    if tail and tail[0].get("role") == "user":  # one user message (templates want turns to alternate)
        tail = [{**tail[0], "content": text + "\n\n" + (tail[0].get("content") or ""), "summary": text}] + tail[1:]
        return system + tail
    return system + [summary_msg] + tail
