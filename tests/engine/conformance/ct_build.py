"""Pre-quantized test checkpoints written by the format's own library, `compressed-tensors`
(the dev extra): a tiny full-precision checkpoint loaded with transformers, its Linear weights
given scales (compressed-tensors' `calculate_qparams`, the min/max rule llm-compressor's default
observer applies) and compressed by its ModelCompressor into W4A16 (pack-quantized), W8A16
(int-quantized) or FP8 (float-quantized); config.json gets the compressor's
quantization_config."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

SCHEMES = {  # name -> (QuantizationArgs fields, compressed-tensors format)
    "w4a16": (dict(num_bits=4, type="int", symmetric=True, strategy="group", group_size=32), "pack-quantized"),
    "w8a16": (dict(num_bits=8, type="int", symmetric=True, strategy="channel"), "int-quantized"),
    "fp8": (dict(num_bits=8, type="float", symmetric=True, strategy="channel"), "float-quantized"),
}


def build(src: Path, dst: Path, scheme: str) -> Path:
    """Write `src` (a tiny transformers-loadable checkpoint) quantized by `scheme` to `dst`."""
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                                 apply_quantization_config)
    from compressed_tensors.quantization.utils import calculate_qparams
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    fields, fmt = SCHEMES[scheme]
    args = QuantizationArgs(**fields)
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.bfloat16)
    config = QuantizationConfig(config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=args)},
                                ignore=["lm_head"])
    apply_quantization_config(model, config)
    for _, module in model.named_modules():
        if hasattr(module, "weight_scale"):
            w = module.weight.float()
            if args.group_size:
                w = w.view(w.shape[0], -1, args.group_size)
                lo, hi = w.amin(-1), w.amax(-1)
            else:
                lo, hi = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
            scale, zero = calculate_qparams(lo, hi, args)
            module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(module.weight_scale.shape)
            if hasattr(module, "weight_zero_point"):
                module.weight_zero_point.data = zero.to(module.weight_zero_point.dtype).reshape(
                    module.weight_zero_point.shape)
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=fmt)
    compressor.compress_model(model)
    dst.mkdir(parents=True, exist_ok=True)
    for file in src.iterdir():
        if file.is_file() and not file.name.endswith(".safetensors"):
            shutil.copy(file, dst / file.name)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if json.loads((src / "config.json").read_text()).get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    save_file(state, str(dst / "model.safetensors"), metadata={"format": "pt"})
    compressor.update_config(str(dst))
    return dst
