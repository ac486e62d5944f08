"""`clover undo [--root DIR] [--force]`: restore the files of the agent's last checkpoint."""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import command_line, root_option


@click.command("undo")
@root_option()
@click.option("--force", is_flag=True, help="Restore even files changed after the agent's edit.")
@click.pass_context
def undo(ctx: click.Context, force: bool) -> None:
    """Restore the files changed by the agent's last edit, byte for byte (files it created are
    removed). Run again to walk back further. Checkpoints live in the user's state folder and are
    verified (hashes, paths) before any file is restored; a damaged one restores nothing."""
    from clover_cli.tools.checkpoints import CheckpointStore

    root = command_line(ctx).root_path()  # --root here or on `clover` (commands/options.py)
    if not root.is_dir():
        raise click.BadParameter(f"{str(root)!r} is not a directory", param_hint="--root")
    result = CheckpointStore(root).undo(force=force)
    click.echo(" ".join(result.output.split("\n")) if not result.ok else result.output,
               err=not result.ok)
    sys.exit(0 if result.ok else 1)
