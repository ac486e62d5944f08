"""The headless agent loop: model backends, tool calls, approvals, sessions (docs/agent.md)."""
from __future__ import annotations

from clover_cli.agent.config import APPROVAL_MODES, AgentConfig
from clover_cli.agent.interface import AgentSession


def __getattr__(name: str):
    # Agent imports the tools registry; load it on first use so `import clover_cli.agent` stays light.
    if name == "Agent":
        from clover_cli.agent.agent import Agent
        return Agent
    raise AttributeError(name)


__all__ = ["Agent", "AgentConfig", "AgentSession", "APPROVAL_MODES"]
