"""Loads the texts sent to the model from prompts/ (no prompt prose lives in Python)."""
from __future__ import annotations

import functools
import importlib.resources
from string import Template


@functools.lru_cache(maxsize=None)
def prompt_text(name: str) -> str:
    """The text of prompts/NAME (e.g. "agent_system.md")."""
    return importlib.resources.files("clover_cli.prompts").joinpath(name).read_text(encoding="utf-8")


def render(name: str, **values: object) -> str:
    """prompts/NAME with $placeholders filled in (unknown placeholders are left as they are)."""
    return Template(prompt_text(name)).safe_substitute({k: str(v) for k, v in values.items()}).strip()


@functools.lru_cache(maxsize=None)
def _sections(name: str) -> dict[str, str]:
    """The "## key" sections of a prompts file (lines before the first section are comments)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in prompt_text(name).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def observation(key: str, **values: object) -> str:
    """A short text from prompts/agent_observations.md with $placeholders filled in."""
    text = _sections("agent_observations.md")[key]
    return Template(text).safe_substitute({k: str(v) for k, v in values.items()})
