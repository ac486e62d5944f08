"""`clover acp`: Clover as an Agent Client Protocol agent on stdin/stdout, for editors that
speak ACP (Zed's `agent_servers`, JetBrains, Toad). See docs/acp.md for the editor settings.

stdout carries only the protocol: anything else that writes to the process's stdout (a library's
progress line) goes to stderr instead, and every protocol message is scrubbed of the API key
(clover_cli/agent/redact.py). `initialize` is answered at once: the model loads on a background
thread, and the first prompt waits for it (a failed load is that prompt's protocol error).
"""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import (DEVICE_HELP, DTYPE_HELP, QUANTIZE_HELP, REQUEST_TIMEOUT_HELP)


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
@click.option("--request-timeout", type=click.FloatRange(1), default=None, metavar="SECONDS", help=REQUEST_TIMEOUT_HELP)
def acp(model, approval, threshold, api_key_env, context_window, cache_mb, device, dtype, quantize,
        request_timeout) -> None:
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
    if request_timeout:
        opts["request_timeout"] = request_timeout
    loading = _load_in_background(lambda: make_backend(model or defaults.model, **opts), (SpecError, BackendError))
    extra = {"context_window": context_window} if context_window else {}

    def make_agent(root, session_id):
        backend = loading.result()  # waits for the load; raises what it raised
        return Agent(backend, AgentConfig(root=root, approval=approval, meta={"command": "acp"},
                                          session_id=session_id, **extra))

    from acp import run_agent
    from acp.stdio import stdio_streams

    from clover_cli import __version__
    from clover_cli.agent.acp.server import CloverAcpAgent
    from clover_cli.agent.redact import scrub_writes

    async def serve() -> None:
        protocol = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)  # stray writes to fd 1 now land on stderr
        sys.stdout = protocol  # stdio_streams opens the protocol pipe from sys.stdout
        try:
            reader, writer = await stdio_streams()
        finally:
            sys.stdout = sys.stderr
        await run_agent(CloverAcpAgent(make_agent, __version__), scrub_writes(writer), reader)

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    finally:
        if loading.done() and loading.exception() is None:
            loading.result().close()


def _load_in_background(load, expected: tuple):
    """A Future of `load()`, run on a daemon thread (a quit does not wait for a load). A failure is
    said on stderr once; an unexpected one becomes a one-line error (the prompt reports it)."""
    import threading
    from concurrent.futures import Future

    from clover_cli.agent.redact import scrub

    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(load())
        except expected as e:
            click.echo(f"clover acp: error: {e}", err=True)
            done.set_exception(RuntimeError(scrub(str(e))))
        except Exception as e:  # noqa: BLE001 - a load that fails is reported, never a traceback
            message = scrub(f"{type(e).__name__}: {e}".splitlines()[0])
            click.echo(f"clover acp: error: cannot load the model: {message}", err=True)
            done.set_exception(RuntimeError(f"cannot load the model: {message}"))

    threading.Thread(target=run, name="clover-acp-load", daemon=True).start()
    return done
