"""The `clover` command line.

Startup matters: `clover --help` imports neither torch nor transformers. Every subcommand lives in
its own module under `clover_cli/commands/` and is imported only when it is invoked; the short help
shown in `clover --help` is kept here so listing commands imports nothing heavy.
"""
from __future__ import annotations

import importlib

import click

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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", "model", default=None, help="Model spec (default: the bundled tiny model).")
@click.option("--root", type=click.Path(file_okay=False), default=None, help="Repository root (default: cwd).")
@click.option("--approval", type=click.Choice(["ask", "auto-edit", "yolo", "read-only"]), default=None,
              help="Approval mode for edits and shell commands.")
@click.option("--continue", "continue_", is_flag=True, help="Resume the last session.")
@click.option("--session", "session_id", default=None, help="Resume the session with this id.")
@click.version_option(package_name="clover-cli", prog_name="clover")
@click.pass_context
def cli(ctx: click.Context, model, root, approval, continue_, session_id) -> None:
    """Clover: a terminal coding assistant on an in-process block-diffusion engine.

    Run `clover` in a repository to open the TUI; `clover COMMAND --help` for the rest.
    """
    if ctx.invoked_subcommand is None:
        chat = cli.get_command(ctx, "chat")
        ctx.invoke(chat, model=model, root=root, approval=approval,
                   continue_=continue_, session_id=session_id)


def main() -> None:
    cli(prog_name="clover")


if __name__ == "__main__":
    main()
