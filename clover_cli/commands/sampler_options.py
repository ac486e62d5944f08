"""`clover generate` options against a family's own sampler (docs/engine.md, "DiffusionGemma").

DiffusionGemma denoises with its entropy-bound sampler, whose settings (steps, temperature
schedule, entropy bound, stopping) come from the checkpoint's generation_config.json. The
threshold rule and the other block-decoding knobs do not apply to it: passing one explicitly is
an error (one line, exit 2), so nobody believes a setting took effect when it did not.
"""
from __future__ import annotations

import click

# options of `clover generate` that only the threshold block decoder (and AR decoding) reads
NOT_FOR_OWN_SAMPLER = ("threshold", "temperature", "top_p", "block_size", "sub_block",
                       "repetition_penalty", "progressive_ending", "token_healing", "eos_confine")


def explicit(ctx: click.Context, names: tuple[str, ...]) -> list[str]:
    """The options among `names` the user gave on the command line (or in the environment)."""
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source not in (click.core.ParameterSource.DEFAULT,
                                                 click.core.ParameterSource.DEFAULT_MAP):
            given.append("--" + name.replace("_", "-"))
    return given


def check_own_sampler(ctx: click.Context, family_name: str) -> None:
    """Exit 2 with one line when an option the family's own sampler ignores was given."""
    if family_name != "diffusion_gemma":
        return
    given = explicit(ctx, NOT_FOR_OWN_SAMPLER)
    if given:
        click.echo(f"clover: error: {', '.join(given)} does not apply to DiffusionGemma: it samples "
                   "with its entropy-bound sampler, set by the checkpoint's generation_config.json",
                   err=True)
        ctx.exit(2)


def budget(max_new_tokens: int | None, lm) -> int:
    """--max-new-tokens, else the checkpoint's own default (DiffusionGemma: generation_config.json's
    max_new_tokens), else 256."""
    if max_new_tokens is not None:
        return max_new_tokens
    if lm.family.name == "diffusion_gemma":
        from clover_cli.engine.gemma_decode import settings_of

        return settings_of(lm).max_new_tokens
    return 256
