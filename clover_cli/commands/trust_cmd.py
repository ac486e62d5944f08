"""`clover trust [PATH]`: let Clover read a repository's own settings (docs/security.md).

`clover trust` trusts the repository at PATH (default: the current directory), `--revoke` records
that it is not trusted, `--forget` removes the decision (the TUI asks again), `--list` shows every
decision. Exit 0 done, 2 bad input (not a directory, unwritable trust list).
"""
from __future__ import annotations

import sys

import click

from clover_cli.commands.options import command_line


def _fail(message: str) -> None:
    click.echo(f"clover trust: error: {message}", err=True)
    sys.exit(2)


@click.command("trust", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", required=False, type=click.Path())
@click.option("--revoke", is_flag=True, help="Record that the repository is NOT trusted.")
@click.option("--forget", is_flag=True, help="Remove the decision (the TUI asks again).")
@click.option("--list", "list_", is_flag=True, help="List every stored decision.")
@click.pass_context
def trust(ctx: click.Context, path: str | None, revoke: bool, forget: bool, list_: bool) -> None:
    """Trust the repository at PATH (default: the current directory).

    A trusted repository's .clover/config.toml is read; it may lower the approval mode and choose
    a local model or a test command, but it can never raise the approval mode or send your prompts
    and API key to a server. Untrusted repositories' settings are ignored.
    """
    from pathlib import Path

    from clover_cli.config import project_config_path
    from clover_cli.trust import TrustStore, real_root

    if sum((revoke, forget, list_)) > 1:
        _fail("use only one of --revoke, --forget and --list")
    store = TrustStore()
    if list_:
        if path:
            _fail("--list takes no PATH")
        entries = store.entries()
        if store.warning:
            click.echo(f"clover trust: warning: {store.warning}", err=True)
        if not entries:
            click.echo(f"No decisions stored in {store.path}.")
        for e in entries:
            click.echo(f"{'trusted    ' if e.trusted else 'not trusted'}  {e.path}  ({e.at})")
        return
    target = Path(path).expanduser() if path else command_line(ctx).root_path()  # else `clover --root`
    if not target.is_dir():
        _fail(f"{str(target)!r} is not a directory")
    key = real_root(target)
    try:
        if forget:
            found = store.forget(target)
            click.echo(f"Forgot the decision for {key}." if found else f"No decision stored for {key}.")
            return
        store.set(target, not revoke)
    except OSError as exc:
        _fail(f"cannot write {store.path}: {exc.strerror or exc}")
    if revoke:
        click.echo(f"Not trusted: {key} (its .clover/config.toml is ignored).")
        return
    shipped = project_config_path(Path(key))
    click.echo(f"Trusted: {key}")
    if shipped.is_file():
        click.echo(f"Its settings ({shipped}) are now read; they may lower the approval mode "
                   "but never raise it, and never pick a remote model.")
