"""The system prompt: who the assistant is and how it works (prompts/), plus AGENTS.md files."""
from __future__ import annotations

from pathlib import Path

from clover_cli.agent.prompt_files import observation, render

MAX_AGENTS_MD_CHARS = 20000


def agents_md_files(root: Path) -> list[Path]:
    """AGENTS.md in root and its parents, outermost first (inner files are more specific)."""
    found = []
    for folder in [root, *root.parents]:
        p = folder / "AGENTS.md"
        if p.is_file():
            found.append(p)
    return list(reversed(found))


def system_prompt(root: Path, extra: str = "") -> str:
    """prompts/agent_system.md for this root, then each AGENTS.md, then extra instructions."""
    parts = [render("agent_system.md", root=root)]
    for p in agents_md_files(root):
        try:
            content = p.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if content:
            shown = p.relative_to(root) if p.is_relative_to(root) else p
            parts.append(observation("project_instructions", path=shown, content=content[:MAX_AGENTS_MD_CHARS]))
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts)
