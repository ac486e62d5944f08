"""MCP client: the tools of the user's Model Context Protocol servers, next to ours (docs/mcp.md).

`attach()` (called when an agent is created) reads `[mcp.servers.*]` from the user's config
file, starts those servers through the `mcp` SDK (only then is it imported) and returns each
tool as `SERVER.tool` for that agent's own tool set (tools/toolset.py; another agent in the
process does not see it): the model sees it with the server's description and
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
from clover_cli.tools.base import ToolResult
from clover_cli.tools.registry import ExternalTool

__all__ = ["attach", "detach", "McpConfigError", "McpError", "McpHub", "RemoteTool", "ServerSpec",
           "load_servers", "schema_of"]

_hubs: dict[tuple, tuple[McpHub, dict, list[str]]] = {}  # configuration -> (hub, tools, notices)
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


def attach() -> tuple[dict[str, ExternalTool], list[str]]:
    """The configured servers' tools, name -> ExternalTool (a fresh dict for the caller's tool
    set), and one-line notices (servers that failed, a bad config).

    Servers started for one configuration keep running for the process: a second agent with
    the same configuration reuses them, and an agent made before the configuration changed
    keeps its own."""
    try:
        specs = load_servers()
    except McpConfigError as e:
        return {}, [str(e)]
    key = tuple(sorted((n, s.describe()) for n, s in specs.items() if s.enabled))
    if not key:
        return {}, []
    with _lock:
        if key not in _hubs:
            hub = McpHub(specs)
            atexit.register(hub.close)
            found, errors = hub.all_tools()
            tools = {t.qualified: ExternalTool(schema_of(t), _runner(hub, t), not t.read_only) for t in found}
            _hubs[key] = (hub, tools, [f"MCP: {msg}" for msg in errors.values()])
        _, tools, notices = _hubs[key]
        return dict(tools), list(notices)


def _runner(hub: McpHub, tool: RemoteTool):
    def run(args: dict, cancel: Any = None) -> ToolResult:
        result: CallResult = hub.call(tool.server, tool.name, args)
        return ToolResult(result.ok, result.text, {"mcp_server": tool.server}
                          if result.ok else {"error": "mcp", "mcp_server": tool.server})
    return run


def detach() -> None:
    """Stops every server this process started (agents holding their tools see them fail)."""
    with _lock:
        hubs = [hub for hub, _, _ in _hubs.values()]
        _hubs.clear()
    for hub in hubs:
        hub.close()
