"""One agent's tools: the built-in ones (tools/registry.py) plus its own external tools (the
user's MCP servers', clover_cli/agent/mcp). Each agent holds its own ToolSet, so two agents in
one process never see each other's external tools (docs/mcp.md)."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from . import registry
from .base import ToolResult
from .registry import ExternalTool, ToolArgumentError


class ToolSet:
    """The tools one agent can call; a built-in name always means the built-in tool."""

    def __init__(self, external: Mapping[str, ExternalTool] | None = None) -> None:
        self.external = {n: t for n, t in (external or {}).items() if n not in registry.PARAMETERS}

    def _outside(self, name: str) -> ExternalTool | None:
        return self.external.get(name)

    def schemas(self) -> list[dict]:
        """Every tool in OpenAI function format: the built-ins, then the external ones."""
        return registry.tool_schemas() + [t.schema for t in self.external.values()]

    def validate_args(self, name: str, args: Any) -> None:
        """ToolArgumentError when `name` is unknown or `args` do not fit. An external tool's
        arguments are its server's to check; here they must be a JSON object."""
        if self._outside(name) is None:
            return registry.validate_args(name, args)
        if args is not None and not isinstance(args, dict):
            raise ToolArgumentError(f"{name}: arguments must be a JSON object, got {type(args).__name__}")

    def is_writing(self, name: str) -> bool:
        """Whether the tool changes files (edit approval; built-ins also checkpoint)."""
        tool = self._outside(name)
        return tool.writing if tool is not None else registry.is_writing_tool(name)

    def planned_writes(self, name: str, args: dict, root: Path) -> list[str]:
        """The paths a built-in writing call would write ([] for external tools: unknown)."""
        return [] if self._outside(name) is not None else registry.planned_writes(name, args, root)

    def preview(self, name: str, args: dict, root: Path) -> str:
        """What an approval prompt shows for the call."""
        if self._outside(name) is None:
            return registry.preview(name, args, root)
        return f"{name} " + json.dumps(args, ensure_ascii=False, default=str)

    def run(self, name: str, args: dict, root: Path, *, on_output: Callable[[str], None] | None = None,
            timeout: float | None = None, cancel: threading.Event | None = None,
            sandbox_profile: str | None = None) -> ToolResult:
        """Runs one call (registry.run_tool for built-ins); never raises."""
        tool = self._outside(name)
        if tool is None:
            return registry.run_tool(name, args, root, on_output=on_output, timeout=timeout, cancel=cancel,
                                     sandbox_profile=sandbox_profile)
        return tool.run(args if isinstance(args, dict) else {}, cancel)
