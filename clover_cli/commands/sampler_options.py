"""`clover generate` options against the family's decode (docs/design.md, "The family table").

Each family takes some of the generation options (engine/families.py, `FamilyRow.options`: the
common ones it takes and its settings class's fields, engine/settings.py):
DiffusionGemma samples with its entropy-bound sampler, set by its generation_config.json, and takes
none of them; Dream and LLaDA 1.x take no healing or repetition control; only LLaDA2 edits. An
option the family does not take is accepted when it asks for the state the family already has
(`--no-token-healing`, `--repetition-penalty 1`, `--no-edit`, its own block size): a script may
pass the same flags to every model. Set to anything else it is an error (one line, exit 2), so
nobody believes a setting took effect when it did not.
"""
from __future__ import annotations

import click

# the option whose flag is not its parameter's name
_FLAGS = {"editing": "--edit", "sub_block_size": "--sub-block"}


def explicit(ctx: click.Context, names) -> list[str]:
    """The options among `names` the user gave on the command line (or in the environment)."""
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source not in (click.core.ParameterSource.DEFAULT,
                                                 click.core.ParameterSource.DEFAULT_MAP):
            given.append(name)
    return given


def flag(name: str) -> str:
    """The command-line flag of an option, e.g. `--top-p` for top_p."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def check_family_options(ctx: click.Context, lm, diffusion_mode: str | None = None) -> None:
    """Exit 2 with one line when an option was given that the model's family cannot honour
    (`diffusion_mode`: the group-level --diffusion-mode, when given)."""
    from clover_cli.engine.families import OPTIONS, takers

    row = lm.family.row
    given = {name: ctx.params[name] for name in explicit(ctx, sorted(OPTIONS)) if name in ctx.params}
    if diffusion_mode is not None:
        given["diffusion_mode"] = diffusion_mode
    refused = row.refused(given, lm.block_size)  # the block it decodes (--block-size where it takes one)
    if refused:
        where = "; ".join(f"{flag(name)}: {takers(name)} only" for name in refused)
        why = row.sampler_note or f"its decode does not take it ({where}; docs/design.md, \"The family table\")"
        click.echo(f"clover: error: {', '.join(flag(n) for n in refused)} does not apply to {row.short}: {why}",
                   err=True)
        ctx.exit(2)


def llada_options():
    """`--remasking` and `--cfg-scale`: LLaDA 1.x exact mode's own generate options
    (engine/settings.py, LladaSettings); other families and modes accept only the defaults."""
    from clover_cli.engine.settings import REMASKINGS

    def wrap(command):
        command = click.option(
            "--cfg-scale", "cfg_scale", type=click.FloatRange(0.0), default=0.0, show_default=True,
            help="LLaDA 1.x exact mode: classifier-free guidance scale against the prompt masked (0: off).")(command)
        return click.option(
            "--remasking", type=click.Choice(REMASKINGS), default=REMASKINGS[0], show_default=True,
            help="LLaDA 1.x exact mode: which masked positions a step commits, the most confident "
                 "or a seeded random draw.")(command)

    return wrap


def budget(max_new_tokens: int | None, lm) -> int:
    """--max-new-tokens, else the checkpoint's own default (DiffusionGemma: generation_config.json's
    max_new_tokens, set by its load hook), else 256."""
    if max_new_tokens is not None:
        return max_new_tokens
    return int(lm.extra.get("max_new_tokens") or 256)
