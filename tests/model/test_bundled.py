"""The bundled tiny model: a loadable Hugging Face directory within the size limit, a
block-diffusion Qwen3 config, and it decodes."""
from __future__ import annotations

import json

LIMIT = 16 * 1024 * 1024


def test_size_and_files(bundled_dir):
    files = {p.name for p in bundled_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "README.md"} <= files
    total = sum(p.stat().st_size for p in bundled_dir.rglob("*") if p.is_file())
    assert total <= LIMIT, f"bundled model is {total / 2**20:.1f} MiB"


def test_config_is_block_diffusion_qwen3(bundled_dir, tok):
    conf = json.loads((bundled_dir / "config.json").read_text())
    assert conf["model_type"] == "qwen3" and conf["architectures"] == ["Qwen3ForCausalLM"]
    assert conf["block_size"] == 32
    assert conf["mask_token_id"] == tok.convert_tokens_to_ids("<|mask|>")
    assert conf["vocab_size"] == len(tok)
    gen = json.loads((bundled_dir / "generation_config.json").read_text())
    assert tok.convert_tokens_to_ids("<|im_end|>") in gen["eos_token_id"]


def test_loads_and_decodes(bundled_dir, tok):
    import torch
    from transformers import AutoModelForCausalLM

    from clover_cli.training.evaluate import bd_generate

    model = AutoModelForCausalLM.from_pretrained(str(bundled_dir), dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    assert model.config.mask_token_id == tok.convert_tokens_to_ids("<|mask|>")
    prompt = tok.apply_chat_template([{"role": "user", "content": "show me setup.py"}],
                                     add_generation_prompt=True, tokenize=False)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    out, forwards = bd_generate(model, ids, model.config.mask_token_id,
                                (tok.convert_tokens_to_ids("<|im_end|>"),), max_new=8)
    assert 1 <= len(out) <= 8 and 1 <= forwards <= len(out)
    assert model.config.mask_token_id not in out
