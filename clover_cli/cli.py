"""The `clover` command line.

Startup matters: `clover --help` imports neither torch nor transformers. Every subcommand lives in
its own module under `clover_cli/commands/` and is imported only when it is invoked; the short help
shown in `clover --help` is kept here so listing commands imports nothing heavy.
"""
from __future__ import annotations

import importlib

import click

from clover_cli.commands.options import (approval_option, diffusion_mode_option, model_option, placement_options,
                                         root_option, session_options, threshold_option)

# name -> (module under clover_cli.commands, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "chat": ("chat_cmd", "chat", "Open the interactive TUI (the default when no command is given)."),
    "generate": ("generate_cmd", "generate", "Decode a prompt with the engine (block diffusion or AR)."),
    "run": ("run_cmd", "run", "Run one task headlessly with the agent."),
    "fix": ("fix_cmd", "fix", "Make a failing test pass."),
    "swebench": ("swebench_cmd", "swebench", "Turn SWE-bench-style instances into preds.jsonl."),
    "trust": ("trust_cmd", "trust", "Trust (or --revoke) a repository's own .clover/config.toml."),
    "tool": ("tool_cmd", "tool", "Run one repository tool and print its JSON result."),
    "undo": ("undo_cmd", "undo", "Restore the files changed by the agent's last edit."),
    "bench": ("bench_cmd", "bench", "Measure TPF, speed and quality: AR mode vs block diffusion."),
    "train": ("train_cmd", "train", "Train or adapt a block-diffusion model."),
    "mcp": ("mcp_cmd", "mcp", "List the MCP servers in your config and their tools."),
    "acp": ("acp_cmd", "acp", "Serve the agent over the Agent Client Protocol on stdio (for editors)."),
    "models": ("models_cmd", "models", "Which model to run: checkpoints, sizes, what fits here."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attr, _ = COMMANDS[name]
        module = importlib.import_module(f"clover_cli.commands.{module_name}")
        return getattr(module, attr)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click's, with the lazy commands as the "Did you mean" candidates (`clover fxi`)."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand:
            raise click.exceptions.NoSuchCommand(str(args[0]), possibilities=list(COMMANDS), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@model_option()
@root_option()
@approval_option()
@threshold_option()
@diffusion_mode_option()
@placement_options()
@session_options()
@click.version_option(package_name="clover-cli", prog_name="clover")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Clover: a terminal coding assistant on an in-process block-diffusion engine.

    Run `clover` in a repository to open the TUI; `clover COMMAND --help` for the rest. The
    options above may also follow the command (`clover run --model X` = `clover --model X run`).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(cli.get_command(ctx, "chat"))  # the options travel on ctx.obj (commands/options.py)


def main() -> None:
    cli(prog_name="clover")


if __name__ == "__main__":
    main()
