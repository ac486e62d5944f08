"""Checkpoint families (docs/engine.md, families table).

A family says how a checkpoint decodes: diffusion or autoregressive, which mask id and block size,
and whether logits are shifted by one (position i-1 predicts token i, Fast-dLLM v2 / Dream).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class FamilyError(ValueError):
    """The config does not describe a checkpoint we can run; message is one line."""


@dataclass(frozen=True)
class Family:
    name: str  # "clover" | "sdar" | "fast_dllm_v2" | "llada2" | "dream" | "llada" | "hybrid" |
    #   "diffusion_gemma" | "ar"
    is_diffusion: bool
    hf_model_type: str  # the transformers model_type the weights load as
    mask_token_id: int | None = None
    block_size: int = 1
    shifted_logits: bool = False  # True: logits at i-1 predict token i
    recurrent: bool = False  # GDN layers carry history as recurrent state
    # what the family's own reference generate does (docs/engine.md, "Families"):
    first_token_rule: bool = False  # a block's first token is the previous position's argmax,
    #   committed before any denoise step (Fast-dLLM v2)
    sub_block: int | None = None  # positions decoded in order inside a block (Fast-dLLM v2: 8)
    stop_ids: tuple[int, ...] | None = None  # the reference's own stop tokens (None: the
    #   checkpoint's EOS ids)
    default_threshold: float | None = None  # the family's own commit threshold, used when the
    #   user sets none (Fast-dLLM v1's 0.9 for Dream / LLaDA 1.x); None: DEFAULT_THRESHOLD
    mask_in_softmax: bool = False  # confidence = softmax over every logit, mask token's included
    #   (the mask is still never a prediction); False: its logit is dropped first (ours)
    steps: int | None = None  # the reference's denoise steps per block (LLaDA2: 32, capped at the
    #   budget): step i commits at least its share of the block (engine/transfer_schedule.py)


# model types transformers can run autoregressively here (checked at load time too)
AR_MODEL_TYPES = {"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "qwen3_moe",
                  "qwen2_moe", "olmo", "olmo2", "granite", "smollm3", "gpt2", "gpt_neox"}
HYBRID_MODEL_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
FAST_DLLM_MASK_ID = 151665
FAST_DLLM_STOP_TOKEN = 151645  # <|im_end|>: the reference generate's stop_token default
FAST_DLLM_SUB_BLOCK = 8  # the reference's small_block_size default
DREAM_TYPES = {"dream", "Dream"}
LLADA1_TYPES = {"llada", "LLaDA"}  # LLaDA 1.x / 1.5 (LLaDAModelLM)
DREAM_MASK_ID = 151666
LLADA1_MASK_ID = 126336
FULL_ATTENTION_FAMILIES = ("dream", "llada")  # engine/fullattn_decode.py decodes these


def detect_family(config: dict[str, Any], *, block_size: int | None = None) -> Family:
    """Pick the family from a raw config.json dict; raises FamilyError with a one-line reason."""
    model_type = str(config.get("model_type", "")).strip()
    if not model_type:
        raise FamilyError("config.json has no model_type")
    mask_id = config.get("mask_token_id")
    cfg_block = config.get("block_size", config.get("bd_size"))

    def _block(default: int | None) -> int:
        value = block_size or cfg_block or default
        if value is None:
            raise FamilyError(f"{model_type} checkpoint has no block_size; pass --block-size")
        if not isinstance(value, int) or not 1 <= value <= 1024:
            raise FamilyError(f"bad block_size {value!r} in config")
        return value

    if model_type == "diffusion_gemma":  # encoder + denoising decoder (engine/gemma_decode.py)
        canvas = config.get("canvas_length", 256)
        if not isinstance(canvas, int) or not 1 <= canvas <= 4096:
            raise FamilyError(f"bad canvas_length {canvas!r} in config")
        return Family("diffusion_gemma", True, "diffusion_gemma", None, canvas)
    if model_type in DREAM_TYPES or model_type in LLADA1_TYPES:
        # full-attention diffusion (engine/fullattn_decode.py): no block structure of their own;
        # block_size is the Fast-dLLM v1 cached modes' block (32)
        dream = model_type in DREAM_TYPES
        mask = mask_id if mask_id is not None else (DREAM_MASK_ID if dream else LLADA1_MASK_ID)
        return Family("dream" if dream else "llada", True, model_type.lower(), int(mask),
                      _block(32), shifted_logits=dream, default_threshold=0.9)
    if model_type == "Fast_dLLM_Qwen" or model_type.lower() == "fast_dllm_qwen":
        mask = mask_id if mask_id is not None else FAST_DLLM_MASK_ID
        # the reference stops at its own stop token only (never generation_config's extra EOS
        # ids); the released config's eos_token_id is that token (151645)
        eos = config.get("eos_token_id")
        stop = eos if isinstance(eos, int) else FAST_DLLM_STOP_TOKEN
        return Family("fast_dllm_v2", True, "qwen2", int(mask), _block(32), shifted_logits=True,
                      first_token_rule=True, sub_block=FAST_DLLM_SUB_BLOCK, stop_ids=(int(stop),),
                      mask_in_softmax=True)
    if model_type == "sdar":
        if mask_id is None:
            raise FamilyError("sdar checkpoint has no mask_token_id in config.json")
        return Family("sdar", True, "qwen3", int(mask_id), _block(4), mask_in_softmax=True)
    if model_type == "llada2_moe":
        # engine/models/llada2.py; the reference generate's defaults: mask 156895, eos 156892
        eos = config.get("eos_token_id")
        return Family("llada2", True, "llada2_moe", int(mask_id if mask_id is not None else 156895),
                      _block(32), stop_ids=(int(eos) if isinstance(eos, int) else 156892,),
                      mask_in_softmax=True, steps=32)
    if model_type in HYBRID_MODEL_TYPES:
        if mask_id is None:
            if cfg_block is not None:
                raise FamilyError(f"{model_type} config has block_size but no mask_token_id")
            # a released (autoregressive) Qwen3.5 / Qwen3-Next: greedy decoding on the AR path
            return Family("ar", False, model_type, recurrent=True)
        return Family("hybrid", True, model_type, int(mask_id), _block(32), recurrent=True)
    if mask_id is not None or cfg_block is not None:
        if mask_id is None:
            raise FamilyError(f"{model_type} config has block_size but no mask_token_id")
        if model_type not in {"qwen3", "qwen2", "llama"}:
            raise FamilyError(f"unknown block-diffusion architecture {model_type!r}")
        return Family("clover", True, model_type, int(mask_id), _block(32))
    if model_type in AR_MODEL_TYPES:
        return Family("ar", False, model_type)
    raise FamilyError(f"unknown architecture {model_type!r} (supported: block-diffusion Qwen3/SDAR, "
                      "Fast-dLLM v2, DiffusionGemma, Qwen3.5/Qwen3-Next hybrids, AR Llama/Qwen2/Qwen3 and similar)")


FAMILY_LABELS = {
    "clover": "Clover block diffusion", "sdar": "SDAR block diffusion",
    "fast_dllm_v2": "Fast-dLLM v2 block diffusion", "llada2": "LLaDA2 block diffusion (MoE)",
    "hybrid": "Gated DeltaNet hybrid block diffusion", "diffusion_gemma": "DiffusionGemma canvas diffusion",
    "dream": "Dream full-attention diffusion", "llada": "LLaDA 1.x full-attention diffusion",
    "ar": "autoregressive",
}


def describe(family: Family) -> str:
    """One line naming the detected family for the user, e.g. `SDAR block diffusion (sdar, block 4)`."""
    label = FAMILY_LABELS.get(family.name, family.name)
    if family.name == "ar":
        kind = "Gated DeltaNet hybrid, " if family.recurrent else ""
        return f"{label} ({kind}{family.hf_model_type})"
    unit = "canvas" if family.name == "diffusion_gemma" else "block"
    return f"{label} ({family.hf_model_type}, {unit} {family.block_size})"
