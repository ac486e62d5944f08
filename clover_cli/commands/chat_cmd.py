"""`clover chat` (and plain `clover`): the interactive TUI.

Only click and the standard library are imported at module level; textual and the agent are
imported inside the command so that `clover --help` stays fast.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from clover_cli.commands.options import (approval_option, cache_mb_option, command_line,
                                         diffusion_mode_option, model_option, root_option,
                                         placement_of, placement_options, session_options,
                                         threshold_option, chosen_threshold, request_timeout_of,
                                         request_timeout_option)


@click.command("chat")
@model_option()
@root_option()
@approval_option()
@threshold_option()
@cache_mb_option()
@diffusion_mode_option()
@placement_options()
@session_options()
@request_timeout_option()
@click.pass_context
def chat(ctx: click.Context) -> None:
    """Open the interactive TUI in the repository ROOT.

    Settings come from ~/.config/clover/config.toml and, once you trust the repository
    (asked here the first time, or `clover trust`), <root>/.clover/config.toml
    (keys: model, approval, threshold, cache_mb, device, dtype; test_cmd is clover fix's); options given here win.
    """
    from clover_cli.config import ConfigError, load_settings

    line = command_line(ctx)
    root_path = line.root_path().resolve()
    if not root_path.is_dir():
        raise click.BadParameter(f"{root_path} is not a directory", param_hint="--root")
    if line.continue_ and line.session_id:
        raise click.UsageError("use either --continue or --session, not both")
    trusted = ask_trust(root_path)
    try:
        settings = load_settings(root_path, line.flags(), needed=("model", "approval", "threshold"),
                                 trusted=trusted)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    cfg = settings.config  # settings.warnings show in the chat log: stderr is hidden behind the TUI

    from clover_cli.tui.app import CloverApp
    from clover_cli.tui.bridge import SessionOptions

    backend_options: dict = {"cache_mb": cfg.cache_mb} if cfg.cache_mb is not None else {}
    backend_options.update(placement_of(settings))  # --device / --dtype (docs/engine.md "Placement")
    backend_options.update(request_timeout_of(ctx))  # openai: models only
    if line.diffusion_mode:  # Dream / LLaDA 1.x (engine/fullattn_decode.py)
        backend_options["diffusion_mode"] = line.diffusion_mode
    options = SessionOptions(model=cfg.model, root=root_path, approval=cfg.approval,
                             threshold=chosen_threshold(settings), resume="last" if line.continue_ else line.session_id,
                             backend_options=backend_options, warnings=tuple(settings.warnings))
    app = CloverApp(options)
    result = app.run()
    if result and result.get("saved"):  # nothing sent: no session file, nothing to resume
        click.echo(f"Session {result['session_id']} saved to {result['session_path']}")
        click.echo("Resume it with: clover --continue" + (f" --root {root_path}" if line.root else ""))
    if app.chat.load_pending:  # quit while the model loads: exit now, never wait for (or print) the load
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def ask_trust(root: Path, stdin=None, stdout=None) -> bool | None:
    """The trust decision for root's own settings, asking once when the repository ships a
    .clover/config.toml, no decision is stored and both stdin and stdout are terminals (never in a
    headless run). The answer, yes or no, is remembered in the trust list (clover_cli/trust.py)."""
    import os

    from clover_cli.config import project_config_path
    from clover_cli.trust import TrustStore

    shipped = project_config_path(root)
    if not os.path.lexists(shipped):
        return None
    store = TrustStore()
    decision = store.decision(root)
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    if decision is not None or not (_isatty(stdin) and _isatty(stdout)):
        return decision
    if store.warning:
        click.echo(f"clover: warning: {store.warning}", err=True)
    click.echo(f"This repository ships its own settings: {shipped}\n"
               "Trusted settings may choose a local model, a test command and a lower approval mode;\n"
               "they can never raise your approval mode or send your prompts and API key elsewhere.")
    answer = click.confirm("Trust this repository's settings?", default=False)
    try:
        store.set(root, answer)
    except OSError as exc:
        click.echo(f"clover: warning: cannot remember the answer in {store.path}: {exc.strerror or exc}", err=True)
    click.echo("Trusted (undo: clover trust --revoke)." if answer else "Not trusted (change: clover trust).")
    return answer


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
