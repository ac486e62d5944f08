"""`/copy`: what to copy (the last answer, or its Nth code block).

The app sends it with Textual's `App.copy_to_clipboard`, an OSC 52 sequence.
OSC 52 (`ESC ] 52 ; c ; BASE64 BEL`) asks the terminal to put text on the system clipboard; it
works over SSH and in tmux (with `set-clipboard on|external`), and terminals that do not support it
ignore it, so the text is also written to a file whose path the notice gives (the fallback).
"""
from __future__ import annotations

import re

FENCE = re.compile(r"^(```+|~~~+)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)


def code_blocks(markdown: str) -> list[str]:
    """The fenced code blocks of a Markdown text, in order (an unclosed fence is not one)."""
    return [m.group(2) for m in FENCE.finditer(markdown)]


def pick(answer: str, arg: str) -> str:
    """The text `/copy ARG` copies from `answer`; raises ValueError with a message for the user."""
    arg = arg.strip()
    if not answer.strip():
        raise ValueError("Nothing to copy yet: there is no answer.")
    if not arg:
        return answer
    if not arg.isdigit() or int(arg) < 1:
        raise ValueError("Usage: /copy (the last answer) or /copy N (its Nth code block, from 1)")
    blocks = code_blocks(answer)
    n = int(arg)
    if n > len(blocks):
        have = f"only {len(blocks)}" if blocks else "no"
        raise ValueError(f"The last answer has {have} code block{'s' if len(blocks) != 1 else ''}; /copy {n} needs {n}.")
    return blocks[n - 1]
