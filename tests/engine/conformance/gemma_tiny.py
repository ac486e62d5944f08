"""A tiny random DiffusionGemma checkpoint in the released layout (docs/engine.md, "DiffusionGemma").

The released google/diffusiongemma-26B-A4B-it config.json could not be obtained here (no hub);
its layout is transformers' own `DiffusionGemmaConfig` (text_config + gemma4_vision
vision_config + canvas_length) with the MoE text model the name says (every layer has a router
and experts). We shrink the defaults: 2 layers (one sliding, one full attention, as the 5:1
pattern ends), width 64, 4 experts (top 2), a one-layer vision tower, and a 16-position canvas;
the vocabulary keeps its real size (262,144; quick tests pass a smaller one) with Gemma's special
ids (pad 0, eos 1, bos 2, and the turn markers). generation_config.json carries every sampler key the reference generate
reads, with few denoising steps so tests stay fast.

The chat template is a stand-in written from Google's published Gemma 4 format (turns
`<|turn>role ... <turn|>`, tools declared in `<|tool>...<tool|>`, calls as
`<|tool_call>call:NAME{key:<|"|>value<|"|>}<tool_call|>`): the checkpoint's own template file was
not obtainable here, and the special-token ids below other than pad/eos/bos are placeholders.
"""
from __future__ import annotations

import json
from pathlib import Path

VOCAB = 262_144
CANVAS = 16
PAD, EOS, BOS = 0, 1, 2
TURN_OPEN, TURN_CLOSE = 105, 106
SPECIALS = {PAD: "<pad>", EOS: "<eos>", BOS: "<bos>", 3: "<unk>", TURN_OPEN: "<|turn>",
            TURN_CLOSE: "<turn|>", 46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>",
            49: "<tool_call|>", 50: "<|tool_response>", 51: "<tool_response|>", 52: '<|"|>'}
ACTIVE = list(range(1000, 1200))  # ordinary tokens the tiny model favours
GENERATION = {"max_new_tokens": 32, "max_denoising_steps": 6,
              "sampler_config": {"entropy_bound": 0.1, "_cls_name": "EntropyBoundSamplerConfig"},
              "t_min": 0.4, "t_max": 0.8, "stability_threshold": 1, "confidence_threshold": 0.005,
              "bos_token_id": BOS, "pad_token_id": PAD, "eos_token_id": [EOS, TURN_CLOSE]}
# Gemma 4's turn format and native tool syntax (see the module docstring: a stand-in)
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<|turn>system\n{% for t in tools %}<|tool>declaration:{{ t['function']['name'] if "
    "t['function'] is defined else t['name'] }}{{ (t['function']['parameters'] if t['function'] is "
    "defined else t['parameters']) | tojson }}<tool|>{% endfor %}<turn|>\n{% endif %}"
    "{% for m in messages %}<|turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] }}<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}")


def config_dict(canvas: int = CANVAS, vocab: int = VOCAB) -> dict:
    text = {"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "global_head_dim": 64,
            "num_global_key_value_heads": 1, "sliding_window": 8, "num_experts": 4, "top_k_experts": 2,
            "moe_intermediate_size": 32, "final_logit_softcapping": 30.0, "pad_token_id": PAD,
            "eos_token_id": EOS, "bos_token_id": BOS, "max_position_embeddings": 4096,
            "layer_types": ["sliding_attention", "full_attention"]}
    vision = {"model_type": "gemma4_vision", "hidden_size": 16, "intermediate_size": 32,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8}
    return {"architectures": ["DiffusionGemmaForBlockDiffusion"], "model_type": "diffusion_gemma",
            "text_config": text, "vision_config": vision, "canvas_length": canvas,
            "tie_word_embeddings": True, "dtype": "bfloat16"}


def write_tokenizer(directory: Path, vocab_size: int = VOCAB):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {SPECIALS.get(i, f"t{i}"): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.add_special_tokens({"additional_special_tokens": [n for i, n in sorted(SPECIALS.items())
                                                           if i > 3]})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    return fast


def build(directory: Path, *, seed: int = 0, canvas: int = CANVAS, vocab: int = VOCAB,
          eos_boost: float = 0.0) -> Path:
    """Write config.json, generation_config.json, weights and tokenizer; returns directory.
    vocab: the real 262,144, or fewer for quick tests (every vocabulary-wide op per step scales
    with it). eos_boost > 0 makes EOS likelier (generations that end inside the budget)."""
    import torch
    from transformers import AutoConfig, DiffusionGemmaForBlockDiffusion

    directory.mkdir(parents=True, exist_ok=True)
    raw = config_dict(canvas, vocab)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights whatever an earlier test set (the eos_boost
    try:                      # forward below sums in a thread-count-dependent order)
        return _build(directory, raw, seed, canvas, vocab, eos_boost)
    finally:
        torch.set_num_threads(threads)


def _build(directory: Path, raw: dict, seed: int, canvas: int, vocab: int, eos_boost: float) -> Path:
    import torch
    from transformers import AutoConfig, DiffusionGemmaForBlockDiffusion

    plain = {k: v for k, v in raw.items() if k not in ("model_type", "architectures", "dtype")}
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(AutoConfig.for_model("diffusion_gemma", **plain))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.1)
        emb = model.model.decoder.embed_tokens.weight  # tied: encoder, decoder and lm_head
        emb.mul_(0.05)
        emb[ACTIVE] *= 40.0  # the favoured tokens dominate, as a trained model's few likely ones
        if eos_boost:  # EOS's row along the decoder's mean output direction: likely everywhere
            seen = []
            hook = model.model.decoder.norm.register_forward_hook(lambda m, i, o: seen.append(o))
            gen = torch.Generator().manual_seed(seed)
            model.model.encoder(input_ids=torch.tensor([ACTIVE[:8]]), cache=None)
            model(input_ids=torch.tensor([ACTIVE[:8]]),
                  decoder_input_ids=torch.randint(0, vocab, (4, canvas), generator=gen)[:1])
            hook.remove()
            direction = seen[-1].mean(dim=(0, 1))
            emb[EOS] = direction / direction.norm() * eos_boost
    model.save_pretrained(str(directory))
    (directory / "config.json").write_text(json.dumps(raw, indent=1))  # the released top-level keys
    (directory / "generation_config.json").write_text(json.dumps(GENERATION, indent=1))
    write_tokenizer(directory, vocab)
    return directory
