"""Text the TUI draws as the model or a tool wrote it: control characters made visible.

Which of the model's text is answer, thinking or tool call is decided once, by the agent
(clover_cli/agent/markup.py, docs/agent.md "Visible text"); the TUI only renders the marked pieces.
"""
from __future__ import annotations

_CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if chr(c) not in "\n\t"}
_CONTROL_PICTURES[0x7F] = 0x2421


def visible_controls(text: str) -> str:
    """Control characters (except newline and tab) as their Unicode pictures (\x19 -> ␙)."""
    return text.translate(_CONTROL_PICTURES)
