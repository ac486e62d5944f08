"""The MCP servers the user declared, from the user's own config file only (docs/mcp.md):

    # $XDG_CONFIG_HOME/clover/config.toml
    [mcp.servers.notes]            # stdio: Clover starts the command
    command = "python3"
    args = ["-m", "notes_server"]
    env = { NOTES_DIR = "/home/me/notes" }

    [mcp.servers.search]           # streamable HTTP: Clover connects to the URL
    url = "http://127.0.0.1:8931/mcp"
    read_only_tools = ["search"]   # only these run in read-only mode (a server's hint is not enough)

A repository cannot add servers: nothing under a repository is read here (docs/security.md).
Standard library only; a bad entry is a one-line McpConfigError naming the file and the key.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class McpConfigError(ValueError):
    """A bad `[mcp.servers.*]` entry; str() is one line."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    timeout: float = 30.0  # seconds for start-up and for each call
    enabled: bool = True
    read_only_tools: tuple[str, ...] = ()  # the user's word that these tools write nothing

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        return self.url if self.url else " ".join([self.command, *self.args])


def user_config_path() -> Path:
    """The user's config.toml (tools/statedir.py resolves the folder)."""
    from clover_cli.tools.statedir import config_home
    return config_home() / "config.toml"


def load_servers(path: Path | None = None) -> dict[str, ServerSpec]:
    """{name: ServerSpec} from the user config (empty when the file or the table is absent)."""
    path = path or user_config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise McpConfigError(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise McpConfigError(f"{path}: not valid TOML: {e}") from None
    return servers_from(data, str(path))


def servers_from(data: dict, where: str = "config") -> dict[str, ServerSpec]:
    mcp = data.get("mcp", {})
    if not isinstance(mcp, dict):
        raise McpConfigError(f"{where}: [mcp] must be a table")
    servers = mcp.get("servers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(f"{where}: [mcp.servers] must be a table")
    out = {}
    for name, entry in servers.items():
        key = f"{where}: [mcp.servers.{name}]"
        if not NAME.match(name):
            raise McpConfigError(f"{key}: a server name is letters, digits, '_' or '-' (at most 40)")
        if not isinstance(entry, dict):
            raise McpConfigError(f"{key} must be a table")
        unknown = set(entry) - {"command", "args", "env", "url", "timeout", "enabled", "read_only_tools"}
        if unknown:
            raise McpConfigError(f"{key}: unknown key(s) {', '.join(sorted(unknown))}")
        command, url = entry.get("command", ""), entry.get("url", "")
        if not isinstance(command, str) or not isinstance(url, str) or bool(command) == bool(url):
            raise McpConfigError(f"{key}: give either command = \"...\" (stdio) or url = \"http...\"")
        if url and not re.match(r"^https?://", url):
            raise McpConfigError(f"{key}: url must start with http:// or https://")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"{key}: args must be a list of strings")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise McpConfigError(f"{key}: env must be a table of strings")
        timeout = entry.get("timeout", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise McpConfigError(f"{key}: timeout must be a number of seconds in (0, 3600]")
        enabled = entry.get("enabled", True)
        if not isinstance(enabled, bool):
            raise McpConfigError(f"{key}: enabled must be true or false")
        read_only = entry.get("read_only_tools", [])
        if not isinstance(read_only, list) or not all(isinstance(a, str) for a in read_only):
            raise McpConfigError(f"{key}: read_only_tools must be a list of tool names")
        out[name] = ServerSpec(name, command, tuple(args), dict(env), url, float(timeout), enabled,
                               tuple(read_only))
    return out
