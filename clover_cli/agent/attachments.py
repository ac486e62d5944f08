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
MAX_READ_BYTES = 4 * MAX_FILE_CHARS + 4  # the most read of a file: what MAX_FILE_CHARS can need
MENTION = re.compile(r"(?<![\w@])@([\w./+-]+[\w/+-])")
ATTACHED = "\n\nAttached file `"


def mentioned_paths(text: str) -> list[str]:
    """The `@path` tokens of `text`, in order, without duplicates (`user@host` is not one)."""
    return list(dict.fromkeys(m.group(1) for m in MENTION.finditer(text)))


def attach_mentions(text: str, root: Path) -> tuple[str, list[str]]:
    """(text for the model, attached paths): `text` plus a block per mentioned readable file."""
    from clover_cli.tools.paths import PathError, relpath, resolve_in_root
    from clover_cli.tools.textio import is_binary

    blocks, attached = [], []
    for mention in mentioned_paths(text):
        if len(attached) >= MAX_FILES:
            break
        try:
            full = resolve_in_root(root, mention)
            data, size = read_head(full, MAX_READ_BYTES)
        except (PathError, OSError, ValueError):
            continue
        if is_binary(data):
            continue
        body = _decode_head(data, cut=len(data) < size)
        note = ""
        if len(data) < size:
            note = (f"\n[cut: first {min(len(body), MAX_FILE_CHARS)} characters of a {size:,}-byte file; "
                    "read_file shows the rest]")
        elif len(body) > MAX_FILE_CHARS:
            note = f"\n[cut: first {MAX_FILE_CHARS} of {len(body)} characters; read_file shows the rest]"
        body = body[:MAX_FILE_CHARS]
        rel = relpath(root, full)
        fence = "````" if "```" in body else "```"
        blocks.append(f"{ATTACHED.lstrip()}{rel}`:\n{fence}\n{body.rstrip(chr(10))}\n{fence}{note}")
        attached.append(rel)
    if not blocks:
        return text, []
    return text + "\n\n" + "\n\n".join(blocks), attached


def read_head(path: Path, limit: int) -> tuple[bytes, int]:
    """(at most `limit` bytes from the start of the regular file `path`, its size). Never
    blocks on a FIFO (opened non-blocking, refused unless regular) and never reads more."""
    import os
    import stat

    from clover_cli.tools.textio import NotRegularFileError, file_kind

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(f"{path} is {file_kind(st.st_mode)}, not a regular file")
        chunks, got = [], 0
        while got < limit:
            chunk = os.read(fd, limit - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
        return data, max(st.st_size, len(data) + (1 if got >= limit and os.read(fd, 1) else 0))
    finally:
        os.close(fd)


def _decode_head(data: bytes, cut: bool) -> str:
    """The text of a file's first bytes: utf-8 (a character split by the cut dropped), else latin-1."""
    from clover_cli.tools.textio import decode

    if cut:
        data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        for trim in range(4):
            try:
                return data[:len(data) - trim].decode("utf-8")
            except UnicodeDecodeError:
                continue
    return decode(data)[0]


def strip_attachments(text: str) -> str:
    """The message as the user typed it (what `attach_mentions` appended removed)."""
    cut = text.find(ATTACHED)
    return text if cut < 0 else text[:cut]
