"""MCP client: the tools of the user's Model Context Protocol servers, next to ours (docs/mcp.md).

`attach()` (called when an agent is created) reads `[mcp.servers.*]` from the user's config
file, starts those servers through the `mcp` SDK (only then is it imported) and registers each
tool as `SERVER.tool` in the tool registry: the model sees it with the server's description and
input schema, calls go through the same approval policy (a tool the user's config does not list
in the server's `read_only_tools` counts as writing, whatever `readOnlyHint` the server claims:
refused in read-only mode, asked in ask mode), and a failure comes back to the model as a failed
tool result. With no servers configured nothing happens.
"""
from __future__ import annotations

import atexit
import threading
from typing import Any

from clover_cli.agent.mcp.config import McpConfigError, ServerSpec, load_servers
from clover_cli.agent.mcp.hub import CallResult, McpError, McpHub, RemoteTool

__all__ = ["attach", "detach", "McpConfigError", "McpError", "McpHub", "RemoteTool", "ServerSpec",
           "load_servers", "schema_of"]

_hub: McpHub | None = None
_attached: dict[tuple, list[str]] = {}
_lock = threading.Lock()


def schema_of(tool: RemoteTool) -> dict:
    """An MCP tool in the OpenAI function format the model sees."""
    params = dict(tool.input_schema) if tool.input_schema else {}
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    tag = " (read-only)" if tool.read_only else ""
    desc = f"[MCP server {tool.server}{tag}] {tool.description}".strip()
    return {"type": "function", "function": {"name": tool.qualified, "description": desc,
                                             "parameters": params}}


def attach() -> list[str]:
    """Registers the configured servers' tools; returns one-line notices (servers that failed).

    Idempotent per configuration: a second agent in the same process reuses the running servers.
    """
    global _hub
    from clover_cli.tools import registry
    from clover_cli.tools.base import ToolResult

    try:
        specs = load_servers()
    except McpConfigError as e:
        return [str(e)]
    key = tuple(sorted((n, s.describe()) for n, s in specs.items() if s.enabled))
    with _lock:
        if key in _attached:
            return []
        detach()
        if not key:
            return []
        _hub = McpHub(specs)
        atexit.register(_hub.close)
        tools, errors = _hub.all_tools()
        hub = _hub

        def runner(tool: RemoteTool):
            def run(args: dict, cancel: Any = None) -> ToolResult:
                result: CallResult = hub.call(tool.server, tool.name, args)
                return ToolResult(result.ok, result.text, {"mcp_server": tool.server}
                                  if result.ok else {"error": "mcp", "mcp_server": tool.server})
            return run

        for tool in tools:
            registry.EXTERNAL[tool.qualified] = (schema_of(tool), runner(tool), not tool.read_only)
        _attached[key] = [t.qualified for t in tools]
        return [f"MCP: {msg}" for msg in errors.values()]


def detach() -> None:
    """Unregisters every MCP tool and stops the servers."""
    global _hub
    from clover_cli.tools import registry
    for names in _attached.values():
        for name in names:
            registry.EXTERNAL.pop(name, None)
    _attached.clear()
    if _hub is not None:
        _hub.close()
        _hub = None
