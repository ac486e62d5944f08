"""The system prompt: who the assistant is and how it works (prompts/), plus AGENTS.md files.

AGENTS.md is untrusted text (docs/security.md): a file is read only when its real path lies inside
the folder it was found in (the repository root, or a folder above it), so a symlink cannot pull a
file from elsewhere on the machine (`~/.ssh/id_rsa`) into the prompt and the saved session; only
regular files are opened (a FIFO would block), and at most the cap is read, never the whole file.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from clover_cli.agent.prompt_files import observation, render

MAX_AGENTS_MD_CHARS = 20000


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def agents_md_files(root: Path) -> list[Path]:
    """AGENTS.md in root and its parents, outermost first (inner files are more specific); each
    one only if its real path stays inside the folder it was found in."""
    found = []
    real_root = Path(os.path.realpath(root))
    for folder in [real_root, *real_root.parents]:
        p = folder / "AGENTS.md"
        if not os.path.lexists(p):
            continue
        if _inside(os.path.realpath(p), str(folder)):
            found.append(p)
    return list(reversed(found))


def read_bounded(path: Path, max_chars: int = MAX_AGENTS_MD_CHARS) -> str | None:
    """At most `max_chars` characters of a regular file (read bounded, never whole); None when it
    is not a regular file or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            raw = f.read(4 * max_chars)
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace")[:max_chars]


def system_prompt(root: Path, extra: str = "") -> str:
    """prompts/agent_system.md for this root, then each AGENTS.md, then extra instructions."""
    parts = [render("agent_system.md", root=root)]
    real_root = Path(os.path.realpath(root))
    for p in agents_md_files(root):
        content = read_bounded(p)
        content = content.strip() if content else ""
        if content:
            shown = p.relative_to(real_root) if p.is_relative_to(real_root) else p
            parts.append(observation("project_instructions", path=shown, content=content))
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts)
