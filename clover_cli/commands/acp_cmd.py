"""`clover acp`: Clover as an Agent Client Protocol agent on stdin/stdout, for editors that
speak ACP (Zed's `agent_servers`, JetBrains, Toad). See docs/acp.md for the editor settings.

stdout carries only the protocol: anything else that writes to the process's stdout (a library's
progress line) goes to stderr instead.
"""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import DEVICE_HELP, DTYPE_HELP, QUANTIZE_HELP


@click.command("acp")
@click.option("--model", "model", default=None,
              help="Model spec (tiny, DIR, hf:ORG/NAME, smollm2, openai:URL#MODEL, replay:FILE).")
@click.option("--approval", type=click.Choice(["ask", "auto-edit", "yolo", "read-only"]), default="ask",
              show_default=True, help="ask: the editor is asked (session/request_permission) for edits and shell.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=None, help="Commit threshold for block diffusion.")
@click.option("--api-key-env", default=None, metavar="NAME", help="Environment variable holding the API key (openai: models).")
@click.option("--context-window", type=click.IntRange(256), default=None, help="The model's context window in tokens.")
@click.option("--cache-mb", type=click.FloatRange(min=0), default=None, metavar="MIB",
              help="MiB kept for earlier requests' caches (prefix reuse; 0: off; default: a quarter of free memory).")
@click.option("--device", default=None, metavar="DEVICE", help=DEVICE_HELP)
@click.option("--dtype", default=None, metavar="DTYPE", help=DTYPE_HELP)
@click.option("--quantize", default=None, metavar="FORMAT", help=QUANTIZE_HELP)
def acp(model, approval, threshold, api_key_env, context_window, cache_mb, device, dtype, quantize) -> None:
    """Serve the agent over ACP (JSON-RPC on stdio) until the editor closes the connection."""
    import asyncio
    import os

    from clover_cli.commands.options import chosen_threshold, placement_of
    from clover_cli.config import ConfigError, load_settings

    try:
        settings = load_settings(None, {"device": device, "dtype": dtype, "quantize": quantize})  # the user's file only
    except ConfigError as e:
        click.echo(f"clover acp: error: {e}", err=True)
        sys.exit(2)
    from clover_cli.agent import Agent, AgentConfig
    from clover_cli.agent.backends import BackendError, make_backend
    from clover_cli.engine.spec import SpecError

    defaults = settings.config
    opts: dict = {"threshold": chosen_threshold(settings) if threshold is None else threshold}
    if api_key_env:
        opts["api_key_env"] = api_key_env
        from clover_cli.tools.sandbox_env import register_secret_env

        register_secret_env(api_key_env)  # its value never reaches a sandboxed command, by any name
    opts.update(placement_of(settings))  # --device / --dtype (docs/engine.md "Placement")
    cache_mb = defaults.cache_mb if cache_mb is None else cache_mb
    if cache_mb is not None:
        opts["cache_mb"] = cache_mb
    try:
        backend = make_backend(model or defaults.model, **opts)
    except (SpecError, BackendError) as e:
        click.echo(f"clover acp: error: {e}", err=True)
        sys.exit(2)
    extra = {"context_window": context_window} if context_window else {}

    def make_agent(root):
        return Agent(backend, AgentConfig(root=root, approval=approval, meta={"command": "acp"}, **extra))

    from acp import run_agent
    from acp.stdio import stdio_streams

    from clover_cli import __version__
    from clover_cli.agent.acp.server import CloverAcpAgent

    async def serve() -> None:
        protocol = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)  # stray writes to fd 1 now land on stderr
        sys.stdout = protocol  # stdio_streams opens the protocol pipe from sys.stdout
        try:
            reader, writer = await stdio_streams()
        finally:
            sys.stdout = sys.stderr
        await run_agent(CloverAcpAgent(make_agent, __version__), writer, reader)

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()
