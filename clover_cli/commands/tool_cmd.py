"""`clover tool NAME --root DIR --args JSON`: run one repository tool headlessly.

Prints one JSON object ({"ok": bool, "output": str, ...}). Exit 0 whether or not the tool
reported ok; exit 2 for an unknown tool or bad arguments.
"""
from __future__ import annotations

import json
import sys

import click

from clover_cli.commands.options import command_line, root_option


def _fail(message: str) -> None:
    click.echo(json.dumps({"ok": False, "output": message, "error": "bad_arguments"}))
    click.echo(f"clover tool: {message}", err=True)
    sys.exit(2)


@click.command("tool")
@click.argument("name")
@root_option("Repository root the tool works in (default: the current directory).")
@click.option("--args", "args_json", default="{}", show_default=True,
              help="The tool's arguments as a JSON object.")
@click.pass_context
def tool(ctx: click.Context, name: str, args_json: str) -> None:
    """Run repository tool NAME (read_file, list_files, grep, repo_map, run_shell,
    apply_patch, edit_file, write_file) and print its JSON result."""
    from clover_cli.tools.registry import ToolArgumentError, run_tool, validate_args

    root = command_line(ctx).root_path()  # --root here or on `clover` (commands/options.py)
    if not root.is_dir():
        _fail(f"root {str(root)!r} is not a directory")
    try:
        args = json.loads(args_json)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge integers, deep nesting
        _fail(f"--args is not valid JSON: {exc}"[:300])
    try:
        validate_args(name, args)
    except ToolArgumentError as exc:
        _fail(str(exc))
    result = run_tool(name, args, root)
    click.echo(json.dumps(result.as_dict(), ensure_ascii=False))
