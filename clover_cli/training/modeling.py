"""Build, adapt, save and export Qwen3-shaped block-diffusion checkpoints."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from clover_cli.engine.config import DEFAULT_THRESHOLD

BLOCK_SIZE = 32
# Size presets for a model trained from scratch. None is called "tiny": that is the bundled
# model's name (a grown "nano"), and a preset of the same name would be a different model.
SIZES = {  # name -> Qwen3Config overrides (measured on this CPU, see docs/model.md)
    "micro": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=16),  # tests only
    "nano": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=32),
    "mini": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64),
    "small": dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                  num_attention_heads=6, num_key_value_heads=2, head_dim=64),
}


DEFAULT_SIZE = "nano"


def new_config(tokenizer, size: str = DEFAULT_SIZE, max_positions: int = 4096,
               block_size: int = BLOCK_SIZE):
    """A Qwen3Config for a fresh block-diffusion model using the tokenizer's special ids."""
    from transformers import Qwen3Config

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    ids = special_ids(tokenizer)
    cfg = Qwen3Config(
        vocab_size=len(tokenizer), max_position_embeddings=max_positions, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=ids["eos"],
        pad_token_id=ids["pad"], **SIZES[size])
    mark_diffusion(cfg, ids["mask"], block_size)
    return cfg


def special_ids(tokenizer) -> dict[str, int]:
    """mask / eos (<|im_end|>) / endoftext / pad ids of our tokenizer."""
    conv = tokenizer.convert_tokens_to_ids
    out = {"mask": conv("<|mask|>"), "eos": conv("<|im_end|>"),
           "endoftext": conv("<|endoftext|>"), "pad": conv("<|pad|>")}
    if any(v is None or v == tokenizer.unk_token_id for v in out.values()):
        raise ValueError("tokenizer lacks <|mask|>, <|im_end|>, <|endoftext|> or <|pad|>")
    return out


def mark_diffusion(cfg, mask_token_id: int, block_size: int = BLOCK_SIZE) -> None:
    """Add the keys that make a config a block-diffusion model (docs/engine.md)."""
    cfg.mask_token_id = int(mask_token_id)
    cfg.block_size = int(block_size)
    cfg.architectures = ["Qwen3ForCausalLM"]


def build_model(cfg, dtype=None, attn: str = "sdpa"):
    """A randomly initialised Qwen3ForCausalLM. `attn` is "sdpa" (2-5x faster on CPU here) or
    "eager"; both are exact with our float additive 4-D mask (tests/model/test_blockdiff_mask)."""
    import torch
    from transformers import Qwen3ForCausalLM

    cfg._attn_implementation = attn
    model = Qwen3ForCausalLM(cfg)
    return model.to(dtype or torch.float32)


def adapt_from_ar(src: Path, tokenizer, block_size: int = BLOCK_SIZE, attn: str = "sdpa"):
    """Load an AR checkpoint (`--from DIR`) and turn it into a block-diffusion model: add the
    mask token to the vocabulary when the tokenizer needed it, set mask_token_id/block_size."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32,
                                                 attn_implementation=attn)
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    mark_diffusion(model.config, tokenizer.convert_tokens_to_ids("<|mask|>"), block_size)
    return model


def new_layer_indices(n_old: int, n_new: int) -> list[int]:
    """Where grow_layers puts its n_new layers in the grown stack of n_old + n_new: one after
    each of n_new evenly spaced groups of the old layers (6 + 3: after old layers 1, 3, 5, i.e.
    new indices 2, 5, 8). Deterministic, so a resumed run finds the same layers to train."""
    if not 0 < n_new <= n_old:
        raise ValueError(f"grow by 1 to {n_old} layers (the model has {n_old}), not {n_new}")
    ends = {round((g + 1) * n_old / n_new) - 1 for g in range(n_new)}
    out, i = [], 0
    for old in range(n_old):
        i += 1
        if old in ends:
            out.append(i)
            i += 1
    return out


def grow_layers(model, n_new: int):
    """Block expansion (LLaMA Pro, Wu et al. 2024, arXiv:2401.02415): a model with n_new more
    decoder layers, each a copy of the layer before it with its two output projections
    (o_proj, down_proj) zeroed, so each new layer adds nothing to the residual stream and the
    grown model computes exactly what the old one did. Training then gives the new layers
    capacity of their own (`train_new_only` leaves the old weights as they were)."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    cfg = copy.deepcopy(model.config)
    n_old = cfg.num_hidden_layers
    added = new_layer_indices(n_old, n_new)
    cfg.num_hidden_layers = n_old + n_new
    if getattr(cfg, "layer_types", None):
        types, old_types = [], list(cfg.layer_types)
        for i in range(cfg.num_hidden_layers):
            types.append(types[-1] if i in added else old_types.pop(0))
        cfg.layer_types = types
    grown = AutoModelForCausalLM.from_config(cfg, dtype=next(model.parameters()).dtype,
                                             attn_implementation=cfg._attn_implementation)
    old_sd, sd = model.state_dict(), {}
    old_of = {}  # grown index -> the old layer it copies
    j = -1
    for i in range(cfg.num_hidden_layers):
        j += i not in added
        old_of[i] = j
    for key, value in old_sd.items():
        if not key.startswith("model.layers."):
            sd[key] = value
    for i, j in old_of.items():
        prefix = f"model.layers.{j}."
        for key, value in old_sd.items():
            if key.startswith(prefix):
                name = key[len(prefix):]
                zero = i in added and name in ("self_attn.o_proj.weight", "mlp.down_proj.weight")
                sd[f"model.layers.{i}.{name}"] = torch.zeros_like(value) if zero else value.clone()
    missing, unexpected = grown.load_state_dict(sd, strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise ValueError(f"grow_layers: state dict mismatch ({missing}, {unexpected})")
    if cfg.tie_word_embeddings:
        grown.tie_weights()
    return grown


def train_only_layers(model, layers: list[int]) -> int:
    """Freeze every parameter but those of the given decoder layers; returns the count left
    trainable."""
    keep = tuple(f"model.layers.{i}." for i in layers)
    n = 0
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(keep))
        n += p.numel() if p.requires_grad else 0
    return n


def param_count(model) -> int:
    """Unique parameters (tied embeddings counted once)."""
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def save_checkpoint(model, tokenizer, out: Path, dtype=None, extra: dict | None = None) -> None:
    """Write a Hugging Face-shaped model dir (config, safetensors, tokenizer, generation config).

    dtype: store weights in this dtype (bf16 keeps the bundled model small)."""
    import torch

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    to_save = model
    if dtype is not None and dtype != next(model.parameters()).dtype:
        import copy
        to_save = copy.deepcopy(model).to(dtype)
    to_save.config.dtype = str(dtype or next(model.parameters()).dtype).replace("torch.", "")
    to_save.save_pretrained(str(out), safe_serialization=True)
    save_tokenizer(tokenizer, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["mask_token_id"] = int(model.config.mask_token_id)
    cfg["block_size"] = int(model.config.block_size)
    cfg.pop("_attn_implementation", None)
    if extra:
        cfg.update(extra)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    gen = {"eos_token_id": eos, "pad_token_id": tokenizer.pad_token_id,
           "mask_token_id": int(model.config.mask_token_id),
           "block_size": int(model.config.block_size), "do_sample": False,
           "threshold": DEFAULT_THRESHOLD}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    del torch


def save_tokenizer(tokenizer, out: Path) -> None:
    """save_pretrained, plus the chat template inside tokenizer_config.json (older readers look
    there; transformers 5 also writes chat_template.jinja) and special_tokens_map.json."""
    from clover_cli.training.tokenizer import write_special_map

    out = Path(out)
    tokenizer.save_pretrained(str(out))
    tc_path = out / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    if tokenizer.chat_template and isinstance(tokenizer.chat_template, str):
        tc["chat_template"] = tokenizer.chat_template
    tc_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")
    write_special_map(out)


def export_model(src: Path, dest: Path, dtype: str = "bfloat16") -> Path:
    """Copy a training checkpoint's model dir (`src/model` or `src` itself) into `dest`,
    storing weights in `dtype`; the model card README.md in dest is kept."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(src)
    model_dir = src / "model" if (src / "model" / "config.json").exists() else src
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(f"no checkpoint in {src} (expected config.json or model/config.json)")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or (any(dest.iterdir()) and not (
            (dest / "config.json").exists() or set(p.name for p in dest.iterdir()) <= {"README.md"}))):
        raise ValueError(f"refusing to replace {dest}: it is not a model directory "
                         "(no config.json); export into an empty or model directory")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    card = (dest / "README.md").read_text() if (dest / "README.md").exists() else None
    tmp = dest.with_name(dest.name + ".export-tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    save_checkpoint(model, tok, tmp, dtype=getattr(torch, dtype))
    for extra in ("train_state.json", "metrics.jsonl"):
        if (model_dir / extra).exists():
            shutil.copy2(model_dir / extra, tmp / extra)
    if card is not None:
        (tmp / "README.md").write_text(card)
    for f in ("__init__.py",):
        if (dest / f).exists():
            shutil.copy2(dest / f, tmp / f)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest
