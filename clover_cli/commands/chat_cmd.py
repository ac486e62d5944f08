"""`clover chat` (and plain `clover`): the interactive TUI.

Only click and the standard library are imported at module level; textual and the agent are
imported inside the command so that `clover --help` stays fast.
"""
from __future__ import annotations

from pathlib import Path

import click


@click.command("chat")
@click.option("--model", "model", default=None,
              help="Model spec: tiny, a checkpoint dir, hf:ORG/NAME, smollm2, openai:URL#MODEL, replay:FILE.")
@click.option("--root", type=click.Path(file_okay=False), default=None, help="Repository root (default: cwd).")
@click.option("--approval", type=click.Choice(["ask", "auto-edit", "yolo", "read-only"]), default=None,
              help="Approval mode for edits and shell commands (default: ask).")
@click.option("--threshold", type=float, default=None, help="Block-diffusion commit threshold (0 < t <= 1).")
@click.option("--continue", "continue_", is_flag=True, help="Resume the last session in this repository.")
@click.option("--session", "session_id", default=None, help="Resume the session with this id.")
def chat(model: str | None, root: str | None, approval: str | None, continue_: bool,
         session_id: str | None, threshold: float | None = None) -> None:
    """Open the interactive TUI in the repository ROOT.

    Defaults come from ~/.config/clover/config.toml and <root>/.clover/config.toml
    (keys: model, approval, threshold; test_cmd is clover fix's); options given here win.
    """
    from clover_cli.config import ConfigError, load_config

    root_path = Path(root or ".").expanduser().resolve()
    if not root_path.is_dir():
        raise click.BadParameter(f"{root_path} is not a directory", param_hint="--root")
    if continue_ and session_id:
        raise click.UsageError("use either --continue or --session, not both")
    try:
        cfg = load_config(root_path, model=model, approval=approval, threshold=threshold)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    from clover_cli.tui.app import CloverApp
    from clover_cli.tui.bridge import SessionOptions

    options = SessionOptions(model=cfg.model, root=root_path, approval=cfg.approval,
                             threshold=cfg.threshold, resume="last" if continue_ else session_id)
    result = CloverApp(options).run()
    if result and result.get("session_id"):
        click.echo(f"Session {result['session_id']} saved to {result['session_path']}")
        click.echo("Resume it with: clover --continue" + (f" --root {root_path}" if root else ""))
