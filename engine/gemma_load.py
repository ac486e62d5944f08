"""Load a DiffusionGemma checkpoint (docs/engine.md, "DiffusionGemma") with transformers' own
network class, `DiffusionGemmaForBlockDiffusion` (no checkpoint code), and the sampler settings
of its generation_config.json (engine/gemma_decode.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .gemma_decode import GemmaSettings, GemmaSettingsError
from .load_common import one_line as _one_line

HF_MODEL_TYPE = "diffusion_gemma"


def load_diffusion_gemma(directory: Path, fields: dict[str, Any], torch_dtype: Any,
                         attention: str, quiet) -> tuple[Any, GemmaSettings]:
    """(model in eval mode, settings); raises ValueError with a one-line reason.

    fields: config.json without the keys the engine decides (engine/config_hygiene.py).
    quiet: a context manager that silences transformers while it loads (engine/loader.py)."""
    from transformers import AutoConfig, DiffusionGemmaForBlockDiffusion

    try:
        settings = GemmaSettings.from_dir(directory)
    except GemmaSettingsError as exc:
        raise ValueError(f"generation_config.json: {exc}") from None
    try:
        with quiet():  # its advisory warnings (a forced last layer type) are not the user's business
            config = AutoConfig.for_model(HF_MODEL_TYPE, **fields)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds here
        raise ValueError(f"bad config for {HF_MODEL_TYPE}: {_one_line(exc)}") from None
    try:
        with quiet():
            model, info = DiffusionGemmaForBlockDiffusion.from_pretrained(
                str(directory), config=config, dtype=torch_dtype, output_loading_info=True,
                local_files_only=True, trust_remote_code=False, use_safetensors=True,
                attn_implementation=attention)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"cannot load weights: {_one_line(exc)}") from None
    missing = sorted(k for k in info.get("missing_keys", []) if "rotary" not in k)
    mismatched = info.get("mismatched_keys", [])
    problems = []
    if missing:
        problems.append(f"missing weights ({len(missing)}, e.g. {missing[0]})")
    if mismatched:
        first = sorted(mismatched)[0]
        problems.append(f"shape mismatch ({len(mismatched)}, e.g. {first[0] if isinstance(first, tuple) else first})")
    if problems:
        raise ValueError("checkpoint does not match its config: " + "; ".join(problems))
    model.eval()
    return model, settings
