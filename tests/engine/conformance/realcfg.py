"""Tiny random checkpoints built from the RELEASED config.json of a family (configs/*.json).

Only `num_hidden_layers` (2) and `hidden_size` (64) shrink; every other key is kept as released,
the kernel-picking ones too (`attn_implementation`, `torch_dtype`, `use_cache`, `auto_map`), so
the loader sees what a user's download carries. The vocabulary keeps its real size with the real
special ids; a word-level tokenizer names every id ("t123"). Only ACTIVE output rows are
non-zero (scaled up, so confidences spread over (0, 1) as in a trained model), the EOS/stop
rows are made likely so generations end inside blocks, and every other logit is exactly 0.
"""
from __future__ import annotations

import json
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"
SPECIALS = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"}
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
ACTIVE = list(range(1000, 1200))  # ordinary tokens the tiny model predicts


def released(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def shrink(raw: dict) -> dict:
    if raw.get("model_type") == "llada":  # LLaDA 1.x names its sizes its own way
        return dict(raw, n_layers=2, d_model=64, n_heads=4, n_kv_heads=4, mlp_hidden_size=128)
    cfg = dict(raw, num_hidden_layers=2, hidden_size=64)
    if cfg.get("head_dim") is None and 64 % cfg["num_attention_heads"]:
        cfg.update(num_attention_heads=4, num_key_value_heads=2)  # 12 heads do not divide 64
    return cfg


def write_tokenizer(directory: Path, vocab_size: int, mask_id: int, eos: str = "<|im_end|>",
                    stop_ids: tuple[int, ...] = (), specials: dict[int, str] | None = None,
                    chat_template: str = CHAT_TEMPLATE):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = dict(SPECIALS if specials is None else specials)
    names[mask_id] = "<|mask|>"
    for i in stop_ids:
        names.setdefault(i, f"<|stop{i}|>")
    vocab = {names.get(i, f"t{i}"): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token="<|endoftext|>",
                                   mask_token="<|mask|>", unk_token="t0")
    fast.add_special_tokens({"additional_special_tokens": [n for i, n in sorted(names.items())]})
    fast.chat_template = chat_template
    fast.save_pretrained(str(directory))
    return fast


LLADA_SPECIALS = {126080: "<|startoftext|>", 126081: "<|endoftext|>", 126346: "<|start_header_id|>",
                  126347: "<|end_header_id|>", 126348: "<|eot_id|>"}
LLADA_TEMPLATE = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
    "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
    "<|end_header_id|>\n\n{% endif %}")


def build(raw: dict, directory: Path, *, hf_type: str, stop_ids: tuple[int, ...], seed: int = 0,
          scale: float = 6.0, eos_boost: float = 2.5, chat_template: str = CHAT_TEMPLATE) -> Path:
    """Write config.json (shrunk, otherwise as released), weights and tokenizer to directory."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    cfg = shrink(raw)
    mask_id = int(cfg.get("mask_token_id") or (156895 if hf_type == "llada2_moe" else 151665))
    if hf_type == "llada":
        write_tokenizer(directory, cfg["vocab_size"], mask_id, eos="<|eot_id|>", stop_ids=stop_ids,
                        specials=LLADA_SPECIALS, chat_template=LLADA_TEMPLATE)
    else:
        write_tokenizer(directory, cfg["vocab_size"], mask_id, stop_ids=stop_ids,
                        chat_template=chat_template)
    plain = {k: v for k, v in cfg.items() if k not in (
        "model_type", "architectures", "auto_map", "attn_implementation", "torch_dtype", "use_cache",
        "transformers_version")}
    torch.manual_seed(seed)
    if hf_type == "llada2_moe":  # no transformers class: the engine's own module
        from clover_cli.engine.models.llada2 import LLaDA2MoE

        model = LLaDA2MoE(cfg)
    elif hf_type == "llada":  # LLaDA 1.x: the engine's own module too
        from clover_cli.engine.models.llada1 import LLaDA1

        model = LLaDA1(cfg)
    else:
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(hf_type, **plain),
                                                 attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.15)
            elif name.endswith("norm.weight"):
                p.fill_(1.0)
        for name, b in model.named_buffers():
            if name.endswith("expert_bias"):
                b.normal_(0.0, 0.1)
        head = model.get_output_embeddings().weight
        active = torch.tensor(ACTIVE + list(stop_ids))
        rows = torch.randn(len(active), head.shape[1]) * scale / head.shape[1] ** 0.5
        rows[len(ACTIVE):] *= eos_boost
        if cfg.get("tie_word_embeddings"):
            # tied: the embedding rows are the head rows; keep the input side random but small
            head.normal_(0.0, 0.02)
        else:
            head.zero_()
        head[active] = rows
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory
