"""Keeping the conversation inside the model's context window.

First old tool outputs are elided (the most recent ones stay), then the model itself summarises
the older part (compaction). The system prompt, the user's task and the latest state survive both.
"""
from __future__ import annotations

from clover_cli.agent.prompt_files import observation


def truncate_output(text: str, max_chars: int) -> str:
    """Cuts a long tool output to its head and tail with a note in between."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    note = observation("truncated", omitted=omitted, head=head, tail=tail)
    return f"{text[:head]}\n{note}\n{text[-tail:]}"


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


def compacted(messages: list[dict], summary: str, task: str) -> list[dict]:
    """The conversation after compaction: system prompt, summary (+ the task verbatim), latest state."""
    system = [m for m in messages[:1] if m.get("role") == "system"]
    body = messages[len(system):]
    tail = body[tail_start(body):]
    text = observation("compaction_summary", summary=summary.strip() or "(no summary)")
    if task and not any(m.get("role") == "user" and m.get("content") == task for m in tail):
        text += "\n\n" + observation("compaction_task", task=task)
    summary_msg = {"role": "user", "content": text, "compaction": True}
    if tail and tail[0].get("role") == "user":
        tail = [{**tail[0], "content": text + "\n\n" + (tail[0].get("content") or "")}] + tail[1:]
        return system + tail
    return system + [summary_msg] + tail
