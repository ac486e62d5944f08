"""The SDAR-1.7B-shaped sections of scripts/gpu_bench.py, on one random checkpoint (the released
SDAR-1.7B-Chat config.json, kept in tests/engine/conformance/configs/) built once per run:

* generate (the product path): `clover generate --device auto --json` run twice (the first run
  compiles the Triton kernels, the second finds them cached), checked to have run on CUDA in
  bfloat16 with the Triton hooks installed; forwards/s.
* model: loaded through the engine's own loader in bf16 on CUDA; t_fwd(T) for T = 1, 32 and 64
  query tokens against a 512-position cache (an AR step, a denoise step, a fused commit+step)
  and decode tokens/s at threshold 0.95.

--dry-run: 2 layers, width 64, float32, on the CPU (generate: the Triton hooks forced through
the interpreter when triton is installed)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "tests/engine/conformance/configs/sdar_1.7b_chat.json"
CONTEXT = 512
SHRINK = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128)  # --dry-run


def sdar_checkpoint(work: Path, dry_run: bool) -> tuple[Path, dict]:
    """The run's SDAR-shaped checkpoint in `work`, built by the first section that needs it."""
    path, stamp = work / "sdar-1.7b", work / "sdar-1.7b.built.json"
    if stamp.exists():
        return path, dict(json.loads(stamp.read_text()), reused=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_checkpoints
    from tiny_checkpoints import build_from_config

    shutil.rmtree(path, ignore_errors=True)  # a build that an earlier section's time limit cut
    dtype = "float32" if dry_run else "bfloat16"
    t0 = time.perf_counter()
    build_from_config(json.loads(CONFIG.read_text()), path, dtype=dtype, **(SHRINK if dry_run else {}))
    info = dict(path=str(path), dtype=dtype, build_seconds=round(time.perf_counter() - t0, 2),
                weight_bytes=sum(f.stat().st_size for f in path.glob("*.safetensors")))
    stamp.write_text(json.dumps(info))
    return path, dict(info, reused=False)


def _clover() -> list[str]:
    """The installed `clover` beside this interpreter, else the module."""
    script = Path(sys.executable).parent / "clover"
    return [str(script)] if script.exists() else [sys.executable, "-m", "clover_cli.cli"]


def bench_generate(work: Path, dry_run: bool, save) -> dict:
    """The product path: `clover generate --device auto --json` on the SDAR-shaped checkpoint."""
    path, ckpt = sdar_checkpoint(work, dry_run)
    triton = importlib.util.find_spec("triton") is not None
    env = dict(os.environ)
    if dry_run and triton:  # the CUDA hooks, through the interpreter (TRITON_INTERPRET=1 is set)
        env["CLOVER_FORCE_TRITON"] = "1"
    prompt = " ".join(f"t{1000 + (i * 7919) % 150_000}" for i in range(16 if dry_run else 480))
    cmd = _clover() + ["generate", "--model", str(path), "--prompt", prompt, "--device", "auto",
                       "--max-new-tokens", "4" if dry_run else "256", "--offline", "--json"]
    want = dict(device="cpu" if dry_run else "cuda", dtype="float32" if dry_run else "bfloat16",
                kernel="block_attention" if triton or not dry_run else None)
    doc = dict(checkpoint=ckpt, command=" ".join(cmd[:2]) + " --model CKPT --prompt '<...>' "
               + " ".join(cmd[-6:]), want=want, runs=[], ok=False)
    save(doc)  # the checkpoint is built
    for run in ("compile", "cached"):
        t0 = time.perf_counter()
        # from the work folder: `python -m` in a checkout would import its clover_cli/ folder
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=900)
        wall = round(time.perf_counter() - t0, 2)
        if proc.returncode:
            doc.update(error=f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}", wall_seconds=wall)
            save(doc)
            return doc
        out = json.loads(proc.stdout)
        secs = max(out["seconds"], 1e-9)
        doc["runs"].append(dict(
            run=run, wall_seconds=wall, seconds=out["seconds"], forwards=out["forwards"],
            generated_tokens=len(out["token_ids"]), forwards_per_second=round(out["forwards"] / secs, 2),
            tokens_per_second=out["tokens_per_second"], tpf=out["tpf"], prompt_tokens=len(out["prompt_ids"]),
            **{k: out.get(k) for k in ("device", "device_name", "dtype", "weight_format", "kernels")}))
        save(doc)
    last = doc["runs"][-1]
    checks = {"device": str(last["device"]).split(":")[0] == want["device"],
              "dtype": last["dtype"] == want["dtype"],
              "kernels": (want["kernel"] in (last["kernels"] or [])) if want["kernel"] else True,
              "forwards": last["forwards"] > 0}
    doc.update(checks=checks, ok=all(checks.values()))
    return doc


def bench_model(dry_run: bool, reps: int, checkpoint: Path | None = None, work: Path | None = None) -> dict:
    """t_fwd(1 / 32 / 64) and decode tokens/s on the SDAR-shaped checkpoint (built into `work`
    unless given)."""
    import torch

    from clover_cli.engine.config import GenerationConfig
    from clover_cli.engine.engine import Engine
    from clover_cli.engine.loader import load_model
    from clover_cli.engine.runtime import block_causal_mask, crop_attention, make_cache

    if checkpoint is None:
        checkpoint, ckpt = sdar_checkpoint(work, dry_run)
    else:
        ckpt = dict(path=str(checkpoint), reused=True)
    device = "cpu" if dry_run else "cuda"
    t0 = time.perf_counter()
    lm = load_model(str(checkpoint), device=device, dtype="float32" if dry_run else "bfloat16")
    load_s = time.perf_counter() - t0
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
           "dtype": str(dtype).split(".")[-1], "context": CONTEXT,
           "build_seconds": ckpt.get("build_seconds"), "checkpoint_reused": ckpt["reused"],
           "load_seconds": round(load_s, 2), "attn_implementation": model.config._attn_implementation}
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
