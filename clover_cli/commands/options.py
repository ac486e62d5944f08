"""The options `clover` and its subcommands share, each declared once (docs/design.md, "Habits").

`--model`, `--root`, `--approval`, `--threshold`, `--continue` and `--session` may be given to
the group or to the subcommand (`clover --model X run ...` and `clover run --model X ...` are the
same). Each decorator here declares its option with `expose_value=False` and a callback that
writes the value into one `CommandLine` object on `ctx.obj`, which click hands from the group's
context down to the subcommand's. The group's options are parsed first, so a value given to the
subcommand wins. A command reads `command_line(ctx)` and passes its flags to the one settings
loader (clover_cli/config.py `load_settings`), never the parent context's params.

Only click, the standard library and the approval/threshold constants are imported (`clover --help`
stays fast).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

from clover_cli.agent.config import APPROVAL_MODES, DEFAULT_MAX_STEPS
from clover_cli.engine.config import DEFAULT_THRESHOLD

MODEL_HELP = ("Model spec: tiny, a checkpoint dir, hf:ORG/NAME, smollm2, openai:URL#MODEL, replay:FILE "
              "(default: `model` in your config, else the bundled tiny model).")


@dataclass
class CommandLine:
    """The shared options as given on the command line (None / False: not given)."""

    model: str | None = None
    root: str | None = None
    approval: str | None = None
    threshold: float | None = None
    cache_mb: float | None = None
    diffusion_mode: str | None = None
    device: str | None = None
    dtype: str | None = None
    quantize: str | None = None
    continue_: bool = False
    session_id: str | None = None
    request_timeout: float | None = None

    def root_path(self) -> Path:
        """--root (default: the current directory), with ~ expanded."""
        return Path(self.root or ".").expanduser()

    def flags(self, *keys: str) -> dict[str, Any]:
        """The settings flags for `load_settings` (model, approval, threshold, cache_mb, device,
        dtype, quantize; None: not given)."""
        keys = keys or ("model", "approval", "threshold", "cache_mb", "device", "dtype", "quantize")
        return {key: getattr(self, key) for key in keys}


def command_line(ctx: click.Context) -> CommandLine:
    """The CommandLine of this invocation (the group's and the subcommand's options merged)."""
    return ctx.ensure_object(CommandLine)


def _store(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None and value is not False:  # not given here: keep the group's value
            setattr(command_line(ctx), field, value)

    return callback


def _shared(*decls: str, field: str, **kwargs: Any) -> Callable:
    return click.option(*decls, expose_value=False, callback=_store(field), default=kwargs.pop("default", None),
                        **kwargs)


def model_option(help: str = MODEL_HELP) -> Callable:
    """--model SPEC."""
    return _shared("--model", field="model", metavar="SPEC", help=help)


def root_option(help: str = "Repository root (default: the current directory).") -> Callable:
    """--root DIR (checked by the command: a bad root is its one-line error)."""
    return _shared("--root", field="root", type=click.Path(), help=help)


def approval_option(modes: tuple[str, ...] = APPROVAL_MODES,
                    help: str = "Approval mode for edits and shell commands (default: ask).") -> Callable:
    """--approval MODE, one of `modes` (clover_cli/agent/config.py's list, or part of it)."""
    return _shared("--approval", field="approval", type=click.Choice(modes), help=help)


def chosen_threshold(settings) -> float | None:
    """The threshold the user chose (a flag, the user's or the repository's config), or None when
    none was: the model's family then uses its own (Fast-dLLM v1's 0.9 for Dream / LLaDA 1.x),
    else the engine's default (docs/engine.md, "Families")."""
    if settings.sources.get("threshold", "default") == "default":
        return None
    return settings.config.threshold


def threshold_option(help: str = f"Block-diffusion commit threshold, 0 < t <= 1 (default {DEFAULT_THRESHOLD})."
                     ) -> Callable:
    """--threshold T (range-checked once, by the settings loader)."""
    return _shared("--threshold", field="threshold", type=float, help=help)


DIFFUSION_MODES = ("exact", "prefix", "dual")  # engine/fullattn_decode.py MODES
DIFFUSION_MODE_HELP = ("Dream / LLaDA 1.x only: exact = the model's own generate (no cache, slow, "
                       "exact); prefix / dual = Fast-dLLM v1 prefix or dual KV cache (fast, "
                       "approximate). Default: dual.")


def diffusion_mode_option(help: str = DIFFUSION_MODE_HELP) -> Callable:
    """--diffusion-mode exact|prefix|dual (full-attention diffusion models; docs/engine.md)."""
    return _shared("--diffusion-mode", field="diffusion_mode", type=click.Choice(DIFFUSION_MODES),
                   help=help)


def cache_mb_option(help: str = "MiB kept for earlier requests' caches, so a prompt that shares a "
                    "prefix with one prefills only the rest (0: off; default: a quarter of free memory)."
                    ) -> Callable:
    """--cache-mb N (checked once, by the settings loader)."""
    return _shared("--cache-mb", field="cache_mb", type=click.FloatRange(min=0), metavar="MIB", help=help)


DEVICE_HELP = ("Where the model runs: auto (CUDA, else MPS, else the CPU), cpu, cuda, cuda:N or mps "
               "(default: `device` in your config, else $CLOVER_DEVICE, else auto).")
DTYPE_HELP = ("Compute precision: auto (bfloat16 on CUDA, float16 on MPS, float32 on the CPU), float32, "
              "bfloat16 or float16 (default: `dtype` in your config, else $CLOVER_DTYPE, else auto).")


QUANTIZE_HELP = ("Quantize the weights on load: int8 or int4 (weight-only; embeddings, output head and "
                 "norms stay in the compute dtype), or none (default: `quantize` in your config, else "
                 "$CLOVER_QUANTIZE, else none). On the CPU both are slower than float32 (the weights "
                 "are dequantized every matmul): they save memory, not time (docs/engine.md).")


def placement_options() -> Callable:
    """--device, --dtype and --quantize (checked once, by the settings loader; docs/engine.md
    "Placement", "Quantized weights")."""
    def decorate(f: Callable) -> Callable:
        f = _shared("--quantize", field="quantize", metavar="FORMAT", help=QUANTIZE_HELP)(f)
        f = _shared("--dtype", field="dtype", metavar="DTYPE", help=DTYPE_HELP)(f)
        return _shared("--device", field="device", metavar="DEVICE", help=DEVICE_HELP)(f)

    return decorate


def placement_of(settings) -> dict[str, str]:
    """The engine backend's device / dtype / quantize options from resolved settings (`auto` left
    out; quantize always, so a flag's `none` beats $CLOVER_QUANTIZE; make_backend gives them to
    the in-process engine only)."""
    cfg = settings.config
    chosen = {k: v for k, v in (("device", cfg.device), ("dtype", cfg.dtype)) if v != "auto"}
    return {**chosen, "quantize": getattr(cfg, "quantize", "none")}


REQUEST_TIMEOUT_HELP = ("openai: models: the most one request may take, headers to last byte, in seconds "
                        "(default 900); a longer wait is said on screen.")


def request_timeout_option(help: str = REQUEST_TIMEOUT_HELP) -> Callable:
    """--request-timeout SECONDS, on every command that can talk to an OpenAI-compatible server."""
    return _shared("--request-timeout", field="request_timeout", type=click.FloatRange(1), metavar="SECONDS",
                   help=help)


def request_timeout_of(ctx: click.Context) -> dict[str, float]:
    """make_backend's `request_timeout` option when --request-timeout was given (ignored by the
    in-process backends)."""
    value = command_line(ctx).request_timeout
    return {"request_timeout": value} if value else {}


def max_steps_option() -> Callable:
    """--max-steps N: model calls per agent turn (one default, clover_cli/agent/config.py's)."""
    return click.option("--max-steps", type=click.IntRange(1), default=DEFAULT_MAX_STEPS, show_default=True,
                        metavar="N", help="Model calls per agent turn before it stops.")


def session_options(continue_help: str = "Resume the last session in this repository.") -> Callable:
    """--continue and --session ID."""
    def decorate(f: Callable) -> Callable:
        f = _shared("--session", field="session_id", metavar="ID", help="Resume the session with this id.")(f)
        return _shared("--continue", field="continue_", is_flag=True, default=False, help=continue_help)(f)

    return decorate
