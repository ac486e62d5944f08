"""`clover undo [--root DIR] [--force]`: restore the files of the agent's last checkpoint."""
from __future__ import annotations

import sys

import click


@click.command("undo")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default=".",
              show_default=True, help="Repository root.")
@click.option("--force", is_flag=True, help="Restore even files changed after the agent's edit.")
def undo(root: str, force: bool) -> None:
    """Restore the files changed by the agent's last edit, byte for byte (files it created are
    removed). Run again to walk back further. Checkpoints live in the user's state folder and are
    verified (hashes, paths) before any file is restored; a damaged one restores nothing."""
    from pathlib import Path

    from clover_cli.tools.checkpoints import CheckpointStore
    result = CheckpointStore(Path(root)).undo(force=force)
    click.echo(" ".join(result.output.split("\n")) if not result.ok else result.output,
               err=not result.ok)
    sys.exit(0 if result.ok else 1)
