"""Connections to MCP servers through the official `mcp` SDK (imported only when a server is
used), on one asyncio loop in a daemon thread so the synchronous agent can call into them.

Each server is one task that opens its transport (a subprocess on stdio, or streamable HTTP),
initialises a ClientSession and keeps it open until `close()`. Starting is on demand (the first
`tools()` or `call()` for that server); every failure is a one-line McpError, never a traceback.
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from clover_cli.agent.mcp.config import ServerSpec


class McpError(RuntimeError):
    """A server that cannot start, list or call; str() is one line."""


@dataclass(frozen=True)
class RemoteTool:
    server: str
    name: str
    description: str
    input_schema: dict
    read_only: bool  # the user's config lists it in `read_only_tools`
    read_only_hint: bool = False  # the server claims so (shown, never trusted)

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


@dataclass(frozen=True)
class CallResult:
    ok: bool
    text: str


def _one_line(e: BaseException | str) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:  # anyio task groups wrap the cause
        return _one_line(e.exceptions[0])
    text = str(e) if isinstance(e, str) else (str(e) or type(e).__name__)
    return " ".join(text.split())[:300]


class _Server:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: Any = None
        self.tools: list[RemoteTool] = []
        self.ready: asyncio.Event | None = None
        self.stop: asyncio.Event | None = None
        self.error = ""
        self.task: asyncio.Task | None = None


class McpHub:
    """The user's MCP servers, started on demand."""

    def __init__(self, specs: dict[str, ServerSpec]) -> None:
        self.specs = {n: s for n, s in specs.items() if s.enabled}
        self._servers: dict[str, _Server] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._devnull: Any = None

    # -- the loop thread --------------------------------------------------------------------------
    def _run(self, coro, timeout: float) -> Any:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="clover-mcp", daemon=True).start()
        fut: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except FutureTimeout:
            fut.cancel()
            raise McpError(f"no answer within {timeout:g} s") from None

    async def _serve(self, srv: _Server) -> None:
        """Opens the transport and session, lists tools, then waits until told to stop."""
        from mcp import ClientSession
        spec = srv.spec
        try:
            if spec.url:
                from mcp.client.streamable_http import streamable_http_client
                transport = streamable_http_client(spec.url)
            else:
                from mcp import StdioServerParameters, stdio_client
                params = StdioServerParameters(command=sys.executable, args=_reaped(spec),
                                               env=dict(spec.env) or None)
                if self._devnull is None:
                    self._devnull = open(os.devnull, "w")  # servers' stderr stays off the terminal
                transport = stdio_client(params, errlog=self._devnull)
            async with transport as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    srv.tools = [_remote(spec, t) for t in listed.tools]
                    srv.session = session
                    srv.ready.set()
                    await srv.stop.wait()
        except BaseException as e:  # noqa: BLE001 - reported to the caller as one line
            srv.error = srv.error or _one_line(e)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            srv.session = None
            srv.ready.set()

    async def _start(self, name: str) -> _Server:
        srv = self._servers.get(name)
        if srv is None:
            srv = self._servers[name] = _Server(self.specs[name])
            srv.ready, srv.stop = asyncio.Event(), asyncio.Event()
            srv.task = asyncio.get_running_loop().create_task(self._serve(srv))
        await srv.ready.wait()
        return srv

    # -- what the agent uses ---------------------------------------------------------------------
    def tools(self, name: str) -> list[RemoteTool]:
        """The tools of server `name`, starting it if needed; McpError if it cannot start."""
        spec = self.specs.get(name)
        if spec is None:
            raise McpError(f"no MCP server named {name!r} in the user config")
        try:
            srv = self._run(self._start(name), spec.timeout)
        except McpError as e:
            raise McpError(f"MCP server {name} ({spec.describe()}) did not start: {e}") from None
        if srv.session is None:
            raise McpError(f"MCP server {name} ({spec.describe()}) did not start: {srv.error or 'it exited'}")
        return list(srv.tools)

    def all_tools(self) -> tuple[list[RemoteTool], dict[str, str]]:
        """(tools of every server that started, {server: error} for those that did not)."""
        tools, errors = [], {}
        for name in self.specs:
            try:
                tools.extend(self.tools(name))
            except McpError as e:
                errors[name] = str(e)
        return tools, errors

    def call(self, server: str, tool: str, args: dict) -> CallResult:
        """Calls one tool; any failure comes back as CallResult(False, message)."""
        spec = self.specs.get(server)
        if spec is None:
            return CallResult(False, f"no MCP server named {server!r}")
        try:
            srv = self._run(self._start(server), spec.timeout)
            if srv.session is None:
                return CallResult(False, f"MCP server {server} is not running: {srv.error or 'it exited'}")
            result = self._run(srv.session.call_tool(tool, args), spec.timeout)
        except McpError as e:
            return CallResult(False, f"MCP tool {server}.{tool}: {e}")
        except Exception as e:  # noqa: BLE001 - the server's failure, for the model to read
            return CallResult(False, f"MCP tool {server}.{tool} failed: {_one_line(e)}")
        return CallResult(not getattr(result, "is_error", getattr(result, "isError", False)),
                          _result_text(result))

    def close(self) -> None:
        """Stops every server (stdio subprocesses exit) and the loop."""
        if self._loop is None:
            return

        async def stop_all() -> None:
            for srv in self._servers.values():
                srv.stop.set()
            tasks = [s.task for s in self._servers.values() if s.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=5)

        try:
            self._run(stop_all(), 8)
        except Exception:  # noqa: BLE001 - shutting down anyway
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop = None
        self._servers.clear()
        if self._devnull is not None:
            self._devnull.close()
            self._devnull = None


def _reaped(spec: ServerSpec) -> list[str]:
    """The arguments that run a stdio server under Clover's subreaper (tools/reaper.py): every
    process it starts, even one that calls setsid, is killed when the server stops or when
    Clover dies, however it dies."""
    from clover_cli.tools.shell import REAPER
    return ["-I", "-S", str(REAPER), "-1", "0.5", str(os.getpid()), "--", spec.command, *spec.args]


def _remote(spec: ServerSpec, tool: Any) -> RemoteTool:
    """A listed tool. It counts as read-only only when the user's config names it in the server's
    `read_only_tools`: the server's readOnlyHint is its claim, not a guarantee (docs/mcp.md)."""
    ann = getattr(tool, "annotations", None)
    hint = bool(getattr(ann, "read_only_hint", getattr(ann, "readOnlyHint", False))) if ann else False
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
    if not isinstance(schema, dict):
        schema = {"type": "object"}
    return RemoteTool(spec.name, tool.name, (getattr(tool, "description", "") or "").strip(), schema,
                      tool.name in spec.read_only_tools, hint)


def _result_text(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', getattr(block, 'mimeType', ''))}, "
                         f"{len(getattr(block, 'data', '') or '')} base64 characters]")
        elif kind == "resource_link" or kind == "resource":
            parts.append(f"[resource {getattr(block, 'uri', '') or getattr(getattr(block, 'resource', None), 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if not parts and structured is not None:
        import json
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(parts) if parts else "(no output)"

