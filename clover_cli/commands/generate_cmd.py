"""`clover generate`: decode one prompt with the engine and show the plain decoding rule."""
from __future__ import annotations

import json
import sys

import click

from clover_cli.commands.options import (command_line, diffusion_mode_option, model_option, placement_of,
                                         placement_options)
from clover_cli.engine.config import DEFAULT_THRESHOLD

from .sampler_options import llada_options


def quiet_transformers() -> None:
    """Silence advisory warnings, and transformers' progress bars and log when a model loaded
    through it, on our users' terminals for the rest of the command. A model that does not need
    transformers (the bundled one: our own network and tokenizer) does not import it for this."""
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    if "transformers" not in sys.modules:
        return
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def parse_spec_or_exit(spec):
    """The typed model spec (engine/spec.py), parsed once at the command boundary, or exit 2."""
    from clover_cli.engine.spec import ModelSpec, SpecError, parse_spec

    if isinstance(spec, ModelSpec):
        return spec
    try:
        return parse_spec(spec)
    except SpecError as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)


def model_choice() -> str:
    """This command's model spec: --model (given to `clover` or to the subcommand), else `model` in
    the user's config, else tiny; or exit 2 with one line for a bad config file."""
    from clover_cli.config import ConfigError, load_settings

    try:
        return load_settings(None, {"model": command_line(click.get_current_context()).model},
                             needed=("model",)).config.model
    except ConfigError as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)


def placement_choice() -> dict:
    """This command's device / dtype (--device/--dtype, else $CLOVER_DEVICE/$CLOVER_DTYPE, else the
    user's config; `auto` left out), or exit 2 with one line for a bad value."""
    from clover_cli.config import ConfigError, load_settings

    ctx = click.get_current_context(silent=True)
    line = command_line(ctx) if ctx is not None else None
    flags = {k: getattr(line, k, None) for k in ("device", "dtype", "quantize")}
    try:
        return placement_of(load_settings(None, flags, needed=("device", "dtype", "quantize")))
    except ConfigError as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)


def load_or_exit(spec, **kwargs):
    """Load an in-process model (a spec string or a typed ModelSpec) or exit 2 with one line;
    on the device and in the dtype the user chose (placement_choice) unless kwargs name them."""
    from clover_cli.engine.loader import ModelLoadError, load_model

    for key, value in placement_choice().items():
        kwargs.setdefault(key, value)
    parsed = parse_spec_or_exit(spec)
    try:
        lm = load_model(parsed, **kwargs)  # quiet while it loads (engine/loader.py)
    except ModelLoadError as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)
    quiet_transformers()
    return lm


@click.command("generate")
@model_option()
@click.option("--prompt", default=None, help="Prompt text.")
@click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Read the prompt from a file.")
@click.option("--raw", is_flag=True, help="Tokenize the prompt as is (no chat template).")
@click.option("--max-new-tokens", type=click.IntRange(1, 1_000_000), default=None,
              help="Token budget (default: 256; DiffusionGemma: its generation_config.json's).")
@click.option("--block-size", type=click.IntRange(1, 1024), default=None, help="Override the model's block size.")
@click.option("--threshold", type=click.FloatRange(0.0, 1.0, min_open=True), default=DEFAULT_THRESHOLD,
              show_default=True, help="Commit masked positions whose confidence is above this, in (0, 1] "
                                      "(Dream / LLaDA 1.x, when not given: Fast-dLLM v1's 0.9).")
@click.option("--temperature", type=click.FloatRange(0.0), default=0.0, show_default=True)
@click.option("--top-p", type=click.FloatRange(0.0, 1.0, min_open=True), default=1.0, show_default=True)
@click.option("--seed", type=int, default=None)
@click.option("--stop", multiple=True, help="Stop string (repeatable).")
@click.option("--repetition-penalty", type=click.FloatRange(1.0), default=1.0, show_default=True,
              help="> 1 turns on repetition control.")
@click.option("--progressive-ending", is_flag=True, help="Bias toward EOS near the token budget.")
@click.option("--token-healing/--no-token-healing", default=None,
              help="Back up the prompt's last token and make the first generated token continue its "
                   "text (a completion prompt ending in a newline then gets its indentation). "
                   "Default: on with --raw, off with the chat template.")
@click.option("--sub-block", "sub_block_size", type=click.IntRange(1, 1024), default=None,
              help="Decode each block in sub-blocks of this many positions, in order "
                   "(default: the family's own; Fast-dLLM v2: 8, others: the whole block).")
@click.option("--eos-confine", is_flag=True,
              help="Speed-up that can change tokens: never select positions after a committed EOS.")
@click.option("--edit/--no-edit", "editing", default=None,
              help="LLaDA2.1 token editing: committed tokens of the current block may be rewritten "
                   "(default: on for a checkpoint named LLaDA2.1, off otherwise).")
@click.option("--editing-threshold", type=click.FloatRange(0.0, 1.0), default=0.9, show_default=True,
              help="With editing: rewrite a committed token whose new prediction is above this.")
@click.option("--max-post-steps", type=click.IntRange(0), default=16, show_default=True,
              help="With editing: editing-only steps after a block has no mask left.")
@diffusion_mode_option()
@placement_options()
@click.option("--diffusion-steps", type=click.IntRange(1), default=None,
              help="Dream / LLaDA 1.x exact mode: denoising steps (default: generation_config.json's, "
                   "else one per generated position).")
@llada_options()
@click.option("--offline", is_flag=True, help="Never download an hf: model (as HF_HUB_OFFLINE=1).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of streaming text.")
@click.pass_context
def generate(ctx, prompt, prompt_file, raw, max_new_tokens, block_size, threshold, temperature,
             top_p, seed, stop, repetition_penalty, progressive_ending, token_healing, sub_block_size,
             eos_confine, editing, editing_threshold, max_post_steps, diffusion_steps, offline,
             as_json, remasking, cfg_scale) -> None:
    """Decode a prompt with the engine (block diffusion or AR) and stream it as blocks commit."""
    diffusion_mode = command_line(click.get_current_context()).diffusion_mode
    if (prompt is None) == (prompt_file is None):
        raise click.UsageError("give exactly one of --prompt or --prompt-file")
    if prompt_file is not None:
        with open(prompt_file, encoding="utf-8") as fh:
            prompt = fh.read()
    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.events import BlockCommitted, GenerationResult
    from clover_cli.engine.loader import ModelLoadError
    from clover_cli.engine.settings import SettingsError, from_options

    from .sampler_options import budget, check_family_options

    lm = load_or_exit(parse_spec_or_exit(model_choice()), block_size=block_size, offline=offline)
    check_family_options(ctx, lm, diffusion_mode)  # what the family does not take (sampler_options.py)
    max_new_tokens = budget(max_new_tokens, lm)
    if (lm.family.default_threshold is not None
            and ctx.get_parameter_source("threshold") is click.core.ParameterSource.DEFAULT):
        threshold = lm.family.default_threshold  # none given: the family's own (Fast-dLLM v1: 0.9)
    own = lm.family.row.sampler  # the family's own sampler (DiffusionGemma: entropy-bound)
    try:
        text = prompt if raw else lm.render_chat([{"role": "user", "content": prompt}])
    except ModelLoadError as exc:
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)
    prompt_ids = lm.encode_raw(text) if raw else lm.encode(text)
    if not prompt_ids:
        click.echo("clover: error: the prompt encodes to no tokens", err=True)
        sys.exit(2)
    # the family's own settings (engine/settings.py) from the flags its class has; the others
    # were checked above (a flag it does not take, set to anything it lacks: exit 2)
    settings = from_options(lm.family.row.settings, dict(
        progressive_ending=progressive_ending, sub_block_size=sub_block_size, eos_confine=eos_confine,
        editing=editing, editing_threshold=editing_threshold, max_post_steps=max_post_steps,
        diffusion_mode=diffusion_mode, diffusion_steps=diffusion_steps, remasking=remasking,
        cfg_scale=cfg_scale))
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, block_size=block_size, threshold=threshold,
                           temperature=temperature, top_p=top_p, seed=seed, stop=tuple(stop),
                           repetition_penalty=repetition_penalty,
                           token_healing=(raw and "token_healing" in lm.family.row.options
                                          if token_healing is None else token_healing),
                           family=settings)
    from clover_cli.engine.families import describe

    result = None
    try:
        engine = Engine(lm)
        events = engine.stream(prompt_ids, cfg)
    except ValueError as exc:  # settings this model's decode does not take (editing, a mode)
        click.echo(f"clover: error: {exc}", err=True)
        sys.exit(2)
    family = describe(lm.family)
    if not as_json:  # which family the checkpoint was detected as (docs/engine.md, "Families")
        click.echo(f"clover: {lm.name}: {family} on {lm.placement.label()}", err=True)
    try:
        for event in events:
            if isinstance(event, BlockCommitted) and not as_json:
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, GenerationResult):
                result = event
    except KeyboardInterrupt:
        click.echo("\nclover: interrupted", err=True)
        sys.exit(130)
    assert result is not None
    stats = result.stats
    if as_json:
        click.echo(json.dumps({
            "text": result.text, "token_ids": list(result.token_ids), "prompt_ids": list(prompt_ids),
            "forwards": stats.forwards, "blocks": stats.blocks, "tpf": round(stats.tpf, 4),
            "seconds": round(stats.total_seconds, 4),
            "tokens_per_second": round(stats.tokens_per_second, 2),
            "finish_reason": result.finish_reason, "steps_per_block": list(stats.steps_per_block),
            "model": lm.name, "family": lm.family.name, "family_label": family,
            "block_size": block_size or lm.block_size,
            "threshold": None if own else threshold, "sampler": own or "threshold",
            "token_healing": cfg.token_healing, **lm.placement.as_dict(),
            "kernels": list(engine.kernels),  # the Triton hooks installed (engine/kernel_hooks.py)
            **({"diffusion_mode": mode} if (mode := _mode(lm, diffusion_mode)) else {}),
        }))
    else:
        click.echo("")
        label = _mode(lm, diffusion_mode)
        click.echo(f"[{result.finish_reason}] {stats.generated_tokens} tokens, {stats.forwards} forwards, "
                   f"TPF {stats.tpf:.2f}, {stats.tokens_per_second:.1f} tok/s"
                   + (f", {label}" if label else ""), err=True)


def _mode(lm, mode: str | None) -> str:
    """The decoding mode's label for full-attention diffusion models ("" for the rest)."""
    from clover_cli.engine.fullattn_decode import mode_label

    return mode_label(lm.family.name, mode)
