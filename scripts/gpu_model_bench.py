"""The model section of scripts/gpu_bench.py: an SDAR-1.7B-shaped random checkpoint (the released
SDAR-1.7B-Chat config.json, kept in tests/engine/conformance/configs/) loaded through the
engine's own loader (flex_attention and all) in bf16 on CUDA; records t_fwd(T) for T = 1, 32 and
64 query tokens against a 512-position cache (an AR step, a denoise step, a fused commit+step)
and decode tokens/s at threshold 0.95. --dry-run: 2 layers, width 64, float32, on the CPU."""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "tests/engine/conformance/configs/sdar_1.7b_chat.json"
CONTEXT = 512


def bench_model(dry_run: bool, reps: int) -> dict:
    import torch

    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model
    from clover_cli.engine.runtime import block_causal_mask, crop_attention, make_cache
    from clover_cli.training.tiny import build_from_config

    raw = json.loads(CONFIG.read_text())
    device = "cpu" if dry_run else "cuda"
    shrink = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128) if dry_run else {}
    with tempfile.TemporaryDirectory(prefix="clover-sdar-shaped-") as tmp:
        t0 = time.perf_counter()
        path = build_from_config(raw, Path(tmp) / "sdar", dtype="float32" if dry_run else "bfloat16",
                                 **shrink)
        build_s = time.perf_counter() - t0
        lm = load_model(str(path), device=device, dtype="float32" if dry_run else "bfloat16")
    model, dtype = lm.model, next(lm.model.parameters()).dtype
    B = 32  # the engine's block size for the timing (SDAR's released block is 4)
    ids = torch.randint(1000, 100_000, (CONTEXT + 64,), device=device)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    cache = make_cache(model)
    with torch.inference_mode():
        pos = torch.arange(CONTEXT, device=device)
        model(input_ids=ids[None, :CONTEXT], position_ids=pos[None], cache=cache,
              attention_mask=block_causal_mask(pos, CONTEXT, B, dtype), use_cache=True)
    assert cache.get_seq_length() == CONTEXT, "the prefill did not fill the cache"
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
           "layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size,
           "dtype": str(dtype).split(".")[-1], "context": CONTEXT, "build_seconds": round(build_s, 2),
           "attn_implementation": model.config._attn_implementation}
    for T in (1, 32, 64):
        pos = torch.arange(CONTEXT, CONTEXT + T, device=device)
        mask = block_causal_mask(pos, CONTEXT + T, B, dtype)
        samples = []
        for i in range(reps + (0 if dry_run else 3)):
            sync()
            t = time.perf_counter()
            with torch.inference_mode():
                model(input_ids=ids[None, CONTEXT:CONTEXT + T], position_ids=pos[None],
                      cache=cache, attention_mask=mask, use_cache=True)
            sync()
            assert cache.get_seq_length() == CONTEXT + T
            crop_attention(cache, T)
            if i >= (0 if dry_run else 3):
                samples.append((time.perf_counter() - t) * 1e3)
        out[f"t_fwd_{T}_ms"] = round(statistics.median(samples), 3)
    prompt = ids[:CONTEXT].tolist()
    engine = Engine(lm)
    new = 32 if dry_run else 256
    engine.generate(prompt, GenerationConfig(max_new_tokens=8, threshold=0.95))  # warm-up
    res = engine.generate(prompt, GenerationConfig(max_new_tokens=new, threshold=0.95))
    s = res.stats
    out.update(decode_threshold=0.95, decode_tokens=s.generated_tokens, decode_forwards=s.forwards,
               decode_tokens_per_second=round(s.generated_tokens / max(s.total_seconds - s.prefill_seconds, 1e-9), 2),
               tpf=round(s.tpf, 3), kernels=engine.kernels)
    return out
