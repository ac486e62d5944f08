"""Tiny Gated DeltaNet hybrids in the RELEASED layout of Qwen3.5-MoE and Qwen3-Next.

The config starts from transformers' own defaults (`Qwen3_5MoeTextConfig()`, `Qwen3NextConfig()`:
the Qwen3.5-35B-A3B / Qwen3-Next-80B-A3B layout) and only sizes shrink (`SCALED`): the width, the
depth (4 layers: one whole period of the 3 linear-attention : 1 full-attention pattern), the
number of routed experts (16; top-k kept: 8 / 10) and the vocabulary (the bundled tokenizer's
4,096 ids, whose ChatML template carries tools). Everything else is the default as it is: gated
attention (q_proj twice as wide: the output gate), 16 query / 2 KV heads of 256, partial rotary
0.25, GDN with 16 key / 32 value heads of 128 and a 4-wide causal conv, expert and shared-expert
widths 512, the shared expert's sigmoid gate, zero-centred RMSNorm. `SHAPE_KEYS` names what
test_hybrid_real.py checks against the defaults. A diffusion variant adds `mask_token_id` and
`block_size`; the AR variant is the same weights without them.

Weights are random (transformers' init with a wider range, so activations are not all alike),
with the output head scaled so confidences spread over (0, 1) as in a trained model, and the EOS
row raised so generations sometimes end inside a block.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

KINDS = ("qwen3_5_moe", "qwen3_next")
HF_TYPES = {"qwen3_5_moe": "qwen3_5_moe_text", "qwen3_next": "qwen3_next"}
SCALED = {"hidden_size": 64, "num_hidden_layers": 4, "num_experts": 16, "vocab_size": 4096}
# fields that define the released layout; kept at transformers' defaults (asserted by the tests)
SHAPE_KEYS = ("head_dim", "num_attention_heads", "num_key_value_heads", "linear_conv_kernel_dim",
              "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
              "linear_num_value_heads", "moe_intermediate_size", "shared_expert_intermediate_size",
              "num_experts_per_tok", "attention_bias", "hidden_act", "rms_norm_eps", "rope_parameters",
              "tie_word_embeddings")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja")
MASK_ID, EOS_ID, PAD_ID = 3, 2, 10  # the bundled tokenizer's <|mask|>, <|im_end|>, <|pad|>
DROP = ("id2label", "label2id", "problem_type", "return_dict", "output_hidden_states",
        "output_attentions", "chunk_size_feed_forward", "is_encoder_decoder", "_name_or_path",
        "transformers_version", "dtype", "architectures", "use_cache")


def default_config(kind: str) -> dict:
    """transformers' default config of `kind` as a plain dict (the released layout, full size)."""
    from transformers import Qwen3_5MoeTextConfig, Qwen3NextConfig

    cls = Qwen3_5MoeTextConfig if kind == "qwen3_5_moe" else Qwen3NextConfig
    return cls().to_dict()


def tiny_config(kind: str, *, block_size: int | None = 32) -> dict:
    """The config.json of a tiny `kind` hybrid; block_size None: a plain AR checkpoint."""
    base = default_config(kind)
    cfg = {k: v for k, v in base.items() if k not in DROP}
    cfg.update(SCALED)
    period = base["layer_types"].index("full_attention") + 1  # 4: three GDN layers, one attention
    assert SCALED["num_hidden_layers"] % period == 0
    cfg["layer_types"] = base["layer_types"][:SCALED["num_hidden_layers"]]
    cfg.update(model_type=HF_TYPES[kind], eos_token_id=EOS_ID, pad_token_id=PAD_ID,
               initializer_range=0.2)
    if block_size is not None:
        cfg.update(mask_token_id=MASK_ID, block_size=block_size)
    return cfg


def build(kind: str, directory: Path, *, block_size: int | None = 32, seed: int = 0,
          logit_scale: float = 8.0, eos_boost: float = 1.0) -> Path:
    """Write config.json, model.safetensors and the bundled tokenizer to directory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from clover_cli.engine.loader import bundled_tiny_dir

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config(kind, block_size=block_size)
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "mask_token_id", "block_size")}
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg["model_type"], **fields),
                                             attn_implementation="eager")
    with torch.no_grad():
        head = model.get_output_embeddings().weight  # [V, H]
        head.mul_(logit_scale / (head.std() * head.shape[1] ** 0.5))
        head[EOS_ID] *= eos_boost  # > 1: EOS wins more positions
    model.save_pretrained(str(directory))
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    for name in TOKENIZER_FILES:
        shutil.copy(bundled_tiny_dir() / name, directory / name)
    return directory


def _block_causal(length: int, block: int, dtype) -> "torch.Tensor":
    """[1, 1, L, L] additive float mask: position p sees k iff k's block <= p's block."""
    import torch

    blk = torch.arange(length) // block
    mask = torch.zeros(length, length, dtype=dtype)
    mask.masked_fill_(blk[None, :] > blk[:, None], torch.finfo(dtype).min)
    return mask[None, None]


def recompute_generate(model, prompt: list[int], *, mask_id: int, block: int, threshold: float,
                       max_new: int, eos_ids: set[int]) -> tuple[list[int], list[int]]:
    """An uncached block decoder for a GDN hybrid, written from the decoding rule in
    docs/engine.md (nothing imported from the engine). Every step runs the whole sequence — the
    committed context and the current block — from scratch: attention layers under a block-causal
    float mask, GDN layers causal (transformers' GDN layers take no 4-D mask), so a GDN layer
    sees a block's tokens in order and the blocks before it, exactly what a cached decoder must
    give with the state changed only at commit. Blocks sit at multiples of `block`; the prompt's
    tail is fixed at the start of its block. A step commits every masked position whose max
    softmax probability (mask logit dropped) is > threshold, else the single most confident; the
    block is decoded until its positions inside the budget are committed; generation ends when a
    committed EOS has no masked position before it, the output cut after it.
    Returns (ids, steps per block)."""
    import torch

    dtype = next(model.parameters()).dtype
    n, limit = len(prompt), len(prompt) + max_new
    seq = list(prompt)
    start = n // block * block
    out: list[int] = []
    steps_per_block: list[int] = []
    while start < limit:
        lo = max(n, start)  # first decodable position
        seq = seq[:lo] + [mask_id] * (start + block - lo)
        end = min(start + block, limit)
        masked = [False] * (lo - start) + [True] * (start + block - lo)
        steps = 0
        while any(masked[lo - start:end - start]):
            with torch.inference_mode():
                logits = model(input_ids=torch.tensor([seq]), attention_mask=_block_causal(len(seq), block, dtype),
                               position_ids=torch.arange(len(seq))[None], use_cache=False).logits[0]
            rows = logits[start:start + block].float()  # [B, V]
            rows[:, mask_id] = float("-inf")
            conf, token = torch.softmax(rows, dim=-1).max(dim=-1)
            live = torch.tensor(masked)
            conf = torch.where(live, conf, torch.tensor(-1.0))
            commit = live & (conf > threshold)
            if not commit.any():
                commit[int(conf.argmax())] = True
            for j in torch.nonzero(commit).flatten().tolist():
                seq[start + j] = int(token[j])
                masked[j] = False
            steps += 1
            for j in range(lo - start, end - start):  # the first committed EOS, if nothing masked before it
                if masked[j]:
                    break
                if seq[start + j] in eos_ids:
                    steps_per_block.append(steps)
                    return out + seq[lo:start + j + 1], steps_per_block
        steps_per_block.append(steps)
        out += seq[lo:end]
        start += block
    return out, steps_per_block


def build_released_layout(directory: Path, *, seed: int = 0) -> Path:
    """The Qwen3.5-MoE release's own file layout: a `qwen3_5_moe` config with the text model under
    `text_config` (tiny_config's, AR) and a vision tower under `vision_config` (shrunk to one
    block), weights saved by transformers' `Qwen3_5MoeForConditionalGeneration` (the released
    architecture: `model.language_model.*`, `model.visual.*`, `lm_head`)."""
    import torch
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration

    from clover_cli.engine.loader import bundled_tiny_dir

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    text = {k: v for k, v in tiny_config("qwen3_5_moe", block_size=None).items() if k != "model_type"}
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=SCALED["hidden_size"])
    torch.manual_seed(seed)
    model = Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(text_config=text, vision_config=vision))
    model.save_pretrained(str(directory))
    for name in TOKENIZER_FILES:
        shutil.copy(bundled_tiny_dir() / name, directory / name)
    return directory
