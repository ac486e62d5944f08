"""Build tiny random checkpoints on disk for the tests, scripts/ and quick experiments (nothing
downloaded). `tests/` is on sys.path in every test run (`from tiny_checkpoints import ...`); a
script puts it there first. Not part of the installed package.

`build_tiny_checkpoint(dir, kind)` writes a Hugging Face-shaped directory: config.json,
model.safetensors and a small byte-level BPE tokenizer with a ChatML template.
"""
from __future__ import annotations

import json
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
_CORPUS = [
    "def add(a, b):\n    return a + b\n", "class Point:\n    x: int = 0\n    y: int = 0\n",
    "import os\nprint(os.getcwd())\n", "The quick brown fox jumps over the lazy dog.",
    "for i in range(10):\n    total += i * 2\n", "héllo wörld — ünïcode ✓ 日本語",
] * 4


def build_tokenizer(directory: Path, vocab_size: int = 320):
    """Train a byte-level BPE on a few lines and save it with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   mask_token="<|mask|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    return fast


def tiny_config(kind: str, vocab_size: int, mask_id: int, eos_id: int, block_size: int = 32) -> dict:
    """A raw config.json dict for `kind` in clover | fast_dllm_v2 | sdar | ar | ar_llama | hybrid |
    hybrid_dense."""
    base = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, eos_token_id=eos_id,
                initializer_range=0.2)
    if kind in ("clover", "ar"):
        cfg = dict(base, model_type="qwen3", architectures=["Qwen3ForCausalLM"])
    elif kind == "sdar":
        cfg = dict(base, model_type="sdar")
    elif kind == "fast_dllm_v2":
        cfg = dict(base, model_type="Fast_dLLM_Qwen", bd_size=block_size)
        cfg.pop("head_dim")
    elif kind == "ar_llama":
        cfg = dict(base, model_type="llama")
    elif kind == "hybrid":
        cfg = dict(base, model_type="qwen3_next", layer_types=["linear_attention", "full_attention"],
                   linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                   linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                   moe_intermediate_size=32, shared_expert_intermediate_size=32, decoder_sparse_step=1,
                   partial_rotary_factor=0.5, full_attention_interval=2)
    elif kind == "hybrid_dense":  # Qwen3.5 text: the same layer mix with a dense MLP
        cfg = dict(base, model_type="qwen3_5_text", layer_types=["linear_attention", "full_attention"],
                   linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                   linear_value_head_dim=16, linear_conv_kernel_dim=4, partial_rotary_factor=0.5,
                   full_attention_interval=2)
    else:
        raise ValueError(f"unknown tiny kind {kind!r}")
    if kind in ("clover", "sdar", "hybrid", "hybrid_dense"):
        cfg.update(mask_token_id=mask_id, block_size=block_size)
    if kind == "fast_dllm_v2":
        cfg["mask_token_id"] = mask_id
    return cfg


def build_tiny_checkpoint(directory: str | Path, kind: str = "clover", *, block_size: int = 32,
                          seed: int = 0, logit_scale: float = 1.0, tokenizer_dir: str | Path | None = None,
                          dtype: str = "float32", **shape) -> Path:
    """Write a random tiny checkpoint of `kind` to `directory` and return it.

    `logit_scale` multiplies the output head so predictions are peaked (confidences above 0.95
    occur, several positions commit per step) as in a trained model; with tied embeddings the
    final norm's weight is scaled instead (the same logits, the input embeddings untouched).
    `tokenizer_dir`: copy that checkpoint's tokenizer (e.g. the bundled model's) instead of
    training the little one. `shape`: config keys over the tiny defaults (hidden_size=768,
    num_hidden_layers=12, max_position_embeddings=16384, ...), for bigger benchmark models
    (scripts/build_bench_checkpoint.py).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is None:
        tok = build_tokenizer(directory)
    else:
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        if "max_position_embeddings" in shape:
            tok.model_max_length = int(shape["max_position_embeddings"])
        tok.save_pretrained(str(directory))
    vocab = len(tok)
    mask_id = tok.convert_tokens_to_ids("<|mask|>")
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    raw = dict(tiny_config(kind, vocab, mask_id, eos_id, block_size), **shape)
    hf_type = {"sdar": "qwen3", "Fast_dLLM_Qwen": "qwen2"}.get(raw["model_type"], raw["model_type"])
    fields = {k: v for k, v in raw.items() if k not in ("model_type", "architectures")}
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(hf_type, **fields))
    with torch.no_grad():
        if raw.get("tie_word_embeddings"):
            model.get_decoder().norm.weight.mul_(logit_scale)
        else:
            model.get_output_embeddings().weight.mul_(logit_scale)
    model.to(getattr(torch, dtype)).save_pretrained(str(directory))
    (directory / "config.json").write_text(json.dumps(raw, indent=2))
    return directory


# Benchmark shapes on the bundled tokenizer (4,096 ids), block size 32, 16K positions (the
# session replay's context reaches ~11K tokens at step 20): "79m" is a Qwen3 of 78.7M parameters
# (width 768, 12 layers, 12 query / 4 KV heads of 64, FFN 2048, tied embeddings); "sdar-1.7b" is
# SDAR-1.7B-Chat's body (width 2048, 28 layers, 16 / 8 heads of 128, FFN 6144) on that vocabulary.
BENCH_SHAPES: dict[str, dict] = {
    "79m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                num_key_value_heads=4, head_dim=64, tie_word_embeddings=True),
    "sdar-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                      num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                      tie_word_embeddings=False),
}


def build_bench_checkpoint(directory: str | Path, shape: str = "79m", *, dtype: str = "float32",
                           seed: int = 0, max_positions: int = 16384, logit_scale: float = 12.0) -> Path:
    """A random block-diffusion checkpoint of a BENCH_SHAPES shape with the bundled tokenizer,
    through `build_tiny_checkpoint` with the test checkpoints' initializer range (0.2) and logit
    scale (12): on the session's first prompt the 79M shape decodes at about 8 tokens per forward
    at 0.95, as a trained model does (a real config's 0.02 gave 0.9, i.e. one token per step)."""
    from clover_cli.engine.loader import bundled_tiny_dir

    if shape not in BENCH_SHAPES:
        raise ValueError(f"unknown bench shape {shape!r}; one of {', '.join(BENCH_SHAPES)}")
    return build_tiny_checkpoint(directory, "clover", block_size=32, seed=seed, logit_scale=logit_scale,
                                 tokenizer_dir=bundled_tiny_dir(), dtype=dtype,
                                 max_position_embeddings=max_positions, rope_theta=1_000_000.0,
                                 **BENCH_SHAPES[shape])


def build_from_config(raw: dict, directory: str | Path, *, dtype: str = "float32", seed: int = 0,
                      **shrink) -> Path:
    """A random checkpoint shaped by a released config.json (`raw`, written back as is but for
    the `shrink` overrides, e.g. num_hidden_layers=2), with a word-level tokenizer over its whole
    vocabulary ("t123"; ChatML specials at Qwen's ids). For timing real shapes (scripts/gpu_bench.py);
    its outputs are noise."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = dict(raw, **shrink)
    vocab_size = int(cfg["vocab_size"])
    names = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"}
    names = {i: n for i, n in names.items() if i < vocab_size}
    if cfg.get("mask_token_id") is not None:
        names[int(cfg["mask_token_id"])] = "<|mask|>"
    tok = Tokenizer(models.WordLevel({names.get(i, f"t{i}"): i for i in range(vocab_size)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0",
                                   eos_token=names.get(151645, "t0"))
    fast.add_special_tokens({"additional_special_tokens": list(names.values())})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    hf_type = {"sdar": "qwen3", "Fast_dLLM_Qwen": "qwen2"}.get(cfg["model_type"], cfg["model_type"])
    from clover_cli.engine.config_hygiene import clean_config

    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(hf_type, **clean_config(cfg)),
                                                 dtype=getattr(torch, dtype))
    model.save_pretrained(str(directory))
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory
