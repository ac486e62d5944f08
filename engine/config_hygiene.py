"""What of a checkpoint's config.json reaches transformers (docs/engine.md, "Config hygiene").

A released config.json carries keys that pick kernels, devices and precisions for the machine its
authors trained on: SDAR's says `"attn_implementation": "flex_attention"`, which crashed the
process on the first CPU forward (a double free, no error line). Those choices are the engine's,
made for the device it runs on; the checkpoint's values are dropped here, never forwarded.
Keys that would run checkpoint code (`auto_map`) are dropped too: nothing in a checkpoint runs.
A quantized checkpoint (`quantization_config`) loads when engine/prequantized.py reads its format
(compressed-tensors W4A16 / W8A16, FP8) and is refused with one line naming those otherwise:
loading packed tensors as plain ones would be silent garbage.
"""
from __future__ import annotations

from typing import Any

# keys that choose an attention kernel, a dtype, a cache policy or a device: the engine decides
ENGINE_DECIDES = frozenset({
    "attn_implementation", "_attn_implementation", "_attn_implementation_internal",
    "_attn_implementation_autoset", "attention_implementation", "experts_implementation",
    "_experts_implementation", "torch_dtype", "dtype", "use_cache", "device_map",
    "use_flash_attn", "use_flash_attention_2", "fuse_cross_entropy", "tp_plan", "base_model_tp_plan",
    "base_model_pp_plan",
})
# keys that describe where a config came from or name checkpoint code
PROVENANCE = frozenset({"model_type", "auto_map", "architectures", "transformers_version",
                        "_name_or_path", "_commit_hash"})


class ConfigError(ValueError):
    """A config the engine will not load; the message is one line."""


def engine_attention(device: Any) -> str:
    """The attention implementation the engine uses: SDPA on every device (the CUDA kernel
    hooks in engine/kernel_hooks.py replace it with our own registered function afterwards)."""
    del device  # sdpa works on CPU and CUDA alike; flash/flex are never taken from a checkpoint
    return "sdpa"


def clean_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of a raw config.json that describe the network; raises ConfigError for a
    quantized checkpoint of a format the engine does not load (engine/prequantized.py)."""
    from .prequantized import PrequantizedError, describe

    try:
        describe(raw)
    except PrequantizedError as exc:
        raise ConfigError(str(exc)) from None
    return {k: v for k, v in raw.items()
            if k not in ENGINE_DECIDES and k not in PROVENANCE and k != "quantization_config"}
