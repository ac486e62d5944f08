"""`clover mcp list`: the MCP servers declared in the user's config and the tools each offers
(docs/mcp.md). Each server is started to ask it; one that does not start is one line. Exit 0 when
every server answered, 1 when one did not, 2 for a bad config file."""
from __future__ import annotations

import json
import sys

import click


@click.group("mcp")
def mcp() -> None:
    """Model Context Protocol servers (configured in ~/.config/clover/config.toml)."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per server.")
def list_servers(as_json: bool) -> None:
    """Start each configured server and list its tools as the model sees them."""
    from clover_cli.agent.mcp import McpConfigError, McpError, McpHub, load_servers
    from clover_cli.agent.mcp.config import user_config_path

    try:
        specs = load_servers()
    except McpConfigError as e:
        click.echo(f"clover mcp: error: {e}", err=True)
        sys.exit(2)
    if not specs:
        click.echo(f"No MCP servers configured (add [mcp.servers.NAME] to {user_config_path()}; "
                   "see docs/mcp.md).")
        return
    hub = McpHub(specs)
    failed = False
    try:
        for name, spec in specs.items():
            if not spec.enabled:
                _show(as_json, name, spec, None, "disabled")
                continue
            try:
                tools = hub.tools(name)
            except McpError as e:
                failed = True
                _show(as_json, name, spec, None, str(e))
                continue
            _show(as_json, name, spec, tools, "")
    finally:
        hub.close()
    sys.exit(1 if failed else 0)


def _show(as_json: bool, name: str, spec, tools, error: str) -> None:
    if as_json:
        click.echo(json.dumps({"server": name, "transport": spec.transport, "target": spec.describe(),
                               "error": error or None,
                               "tools": [{"name": t.qualified, "read_only": t.read_only, "read_only_hint": t.read_only_hint,
                                          "description": t.description} for t in tools or []]}))
        return
    head = f"{name}  ({spec.transport}: {spec.describe()})"
    if error:
        click.echo(f"{head}  -- {error}")
        return
    click.echo(f"{head}  {len(tools)} tool{'s' if len(tools) != 1 else ''}")
    for t in tools:
        desc = " ".join(t.description.split())[:90]
        click.echo(f"  {t.qualified:32s} {'read-only' if t.read_only else 'writes   '}  {desc}")
