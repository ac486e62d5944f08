"""`@path` mentions in a prompt: the mentioned repository files are attached to the message.

The user's text stays as typed; each mentioned file that exists inside the root, is a regular
text file and is not too large is appended below it as a fenced block, so the model sees the
content without a read_file call (docs/tui.md, "@ files"). Paths are resolved with the tools'
own root check (tools/paths.py), so `@../secret` or a symlink out of the root attaches nothing.
Headless: no UI here.
"""
from __future__ import annotations

import re
from pathlib import Path

MAX_FILE_CHARS = 12_000  # per file; longer files are cut with a note
MAX_FILES = 5
MENTION = re.compile(r"(?<![\w@])@([\w./+-]+[\w/+-])")
ATTACHED = "\n\nAttached file `"


def mentioned_paths(text: str) -> list[str]:
    """The `@path` tokens of `text`, in order, without duplicates (`user@host` is not one)."""
    return list(dict.fromkeys(m.group(1) for m in MENTION.finditer(text)))


def attach_mentions(text: str, root: Path) -> tuple[str, list[str]]:
    """(text for the model, attached paths): `text` plus a block per mentioned readable file."""
    from clover_cli.tools.paths import PathError, relpath, resolve_in_root
    from clover_cli.tools.textio import decode, is_binary, read_regular

    blocks, attached = [], []
    for mention in mentioned_paths(text):
        if len(attached) >= MAX_FILES:
            break
        try:
            full = resolve_in_root(root, mention)
            data = read_regular(full)
        except (PathError, OSError, ValueError):
            continue
        if is_binary(data):
            continue
        body, _ = decode(data)
        note = ""
        if len(body) > MAX_FILE_CHARS:
            note = f"\n[cut: first {MAX_FILE_CHARS} of {len(body)} characters; read_file shows the rest]"
            body = body[:MAX_FILE_CHARS]
        rel = relpath(root, full)
        fence = "````" if "```" in body else "```"
        blocks.append(f"{ATTACHED.lstrip()}{rel}`:\n{fence}\n{body.rstrip(chr(10))}\n{fence}{note}")
        attached.append(rel)
    if not blocks:
        return text, []
    return text + "\n\n" + "\n\n".join(blocks), attached


def strip_attachments(text: str) -> str:
    """The message as the user typed it (what `attach_mentions` appended removed)."""
    cut = text.find(ATTACHED)
    return text if cut < 0 else text[:cut]
