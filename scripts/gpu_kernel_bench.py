"""The kernel section of scripts/gpu_bench.py: each Triton kernel timed against its torch
reference and the plain torch path, with their agreement (docs/kernels.md, "GPU benchmark").

Realistic shapes: block confidence over 32 rows x 151,936 vocabulary (bf16 logits); block
attention with P=4096 cached positions, L=32, Hq=16, Hkv=4, D=128 (bf16); the gated delta rule
with T=32 and T=4096, H=16, Dk=Dv=128 (bf16 inputs, fp32 state, L2-normalised q/k). --dry-run:
tiny shapes on the CPU through the Triton interpreter (TRITON_INTERPRET=1, set by the caller
before triton is imported).
"""
from __future__ import annotations

import importlib
import statistics
import sys
import time
from pathlib import Path

import torch

MODULES = ["confidence.reference", "confidence.triton_kernel", "block_attention.reference",
           "block_attention.triton_kernel", "gated_delta.reference", "gated_delta.triton_kernel"]
OPS = ("confidence", "attention", "gated_delta")
DEV = torch.device("cpu")
REPS = 1
HALF = torch.float32
ROWS: list[dict] = []


def _import_kernels() -> list:
    try:  # the installed project
        return [importlib.import_module(f"clover_cli.kernels.{m}") for m in MODULES]
    except ImportError:  # a bare checkout: import the kernels/ folder itself
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        return [importlib.import_module(f"kernels.{m}") for m in MODULES]


def timed(fn) -> float:
    """Median milliseconds of fn() over REPS runs, after warm-up runs (compilation)."""
    for _ in range(2 if DEV.type == "cuda" else 0):  # the interpreter does not compile
        fn()
    samples = []
    for _ in range(REPS):
        if DEV.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def rms_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def record(op: str, shape: str, impl: str, ms: float | None, error: float | None, tol: float | None,
           note: str = "") -> None:
    ok = None if error is None else bool(error <= tol)
    ROWS.append(dict(op=op, shape=shape, impl=impl, ms=ms, error=error, tol=tol, ok=ok, note=note))


def bench_confidence() -> None:
    B, L, V = (1, 32, 151_936) if DEV.type == "cuda" else (1, 32, 500)
    shape = f"B{B} L{L} V{V} {str(HALF).split('.')[-1]}"
    gen = torch.Generator(device=DEV).manual_seed(0)
    logits = (torch.randn(B, L, V, device=DEV, generator=gen) * 3).to(HALF)  # [B, L, V]
    masked = torch.ones(B, L, dtype=torch.bool, device=DEV)
    mask_id = V - 1

    def torch_path():  # logsumexp instead of a full softmax: exp(max - lse)
        x = logits.float().clone()  # [B, L, V]
        x[..., mask_id] = float("-inf")
        top, tok = x.max(-1)
        conf = (top - torch.logsumexp(x, -1)).exp()
        return tok, conf, conf_ref.commit_mask(conf, masked, 0.95)

    ref = conf_ref.select_commits_reference(logits, masked, 0.95, mask_token_id=mask_id)
    tri = conf_tri.select_commits_triton(logits, masked, 0.95, mask_id)
    mismatch = (tri[0] != ref[0]).float().mean().item()
    err = max(mismatch, (tri[1] - ref[1]).abs().max().item(),
              float(not torch.equal(tri[2], conf_ref.commit_mask(tri[1], masked, 0.95))))
    record("confidence", shape, "triton", timed(lambda: conf_tri.select_commits_triton(
        logits, masked, 0.95, mask_id)), err, 1e-5, "max of token mismatch / |dconf|")
    record("confidence", shape, "reference", timed(lambda: conf_ref.select_commits_reference(
        logits, masked, 0.95, mask_token_id=mask_id)), None, None, "softmax + max")
    tp = torch_path()
    record("confidence", shape, "torch-logsumexp", timed(torch_path),
           max((tp[0] != ref[0]).float().mean().item(), (tp[1] - ref[1]).abs().max().item()),
           1e-5)


def bench_attention() -> None:
    B, Hq, Hkv, L, P, D = (1, 16, 4, 32, 4096, 128) if DEV.type == "cuda" else (1, 4, 2, 32, 80, 32)
    shape = f"B{B} Hq{Hq} Hkv{Hkv} L{L} P{P} D{D}"
    gen = torch.Generator(device=DEV).manual_seed(1)
    q = torch.randn(B, Hq, L, D, device=DEV, generator=gen).to(HALF)
    kc, vc = (torch.randn(B, Hkv, P, D, device=DEV, generator=gen).to(HALF) for _ in range(2))
    kb, vb = (torch.randn(B, Hkv, L, D, device=DEV, generator=gen).to(HALF) for _ in range(2))
    ref = attn_ref.block_attention_reference(q, kc, vc, kb, vb)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def torch_path():
        k = torch.cat([kc, kb], dim=2)  # [B, Hkv, P+L, D]
        v = torch.cat([vc, vb], dim=2)
        try:
            return sdpa(q, k, v, enable_gqa=True)
        except TypeError:  # torch < 2.5: repeat the shared heads
            return sdpa(q, k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1))

    tol = 1e-5 if HALF == torch.float32 else 2e-2
    tri = attn_tri.block_attention_triton(q, kc, vc, kb, vb)
    record("block_attention", shape, "triton", timed(
        lambda: attn_tri.block_attention_triton(q, kc, vc, kb, vb)), rms_rel(tri, ref), tol)
    record("block_attention", shape, "reference", timed(
        lambda: attn_ref.block_attention_reference(q, kc, vc, kb, vb)), None, None,
        "fp32 softmax, repeated heads")
    record("block_attention", shape, "torch-sdpa", timed(torch_path),
           rms_rel(torch_path(), ref), tol, "cat + scaled_dot_product_attention")


def bench_gated_delta(T: int) -> None:
    B, H, D = (1, 16, 128) if DEV.type == "cuda" else (1, 2, 16)
    if DEV.type == "cpu":
        T = min(T, 33)
    shape = f"B{B} T{T} H{H} Dk{D} Dv{D}"
    gen = torch.Generator(device=DEV).manual_seed(2)
    q, k = (torch.randn(B, T, H, D, device=DEV, generator=gen).to(HALF) for _ in range(2))
    v = torch.randn(B, T, H, D, device=DEV, generator=gen).to(HALF)
    g = -torch.rand(B, T, H, device=DEV, generator=gen) * 0.3
    beta = torch.rand(B, T, H, device=DEV, generator=gen)
    s0 = torch.randn(B, H, D, D, device=DEV, generator=gen) * 0.1
    args = (q, k, v, g, beta, s0, True)
    truth_o, truth_s = gdn_ref.recurrent_gated_delta_rule(*args, use_qk_l2norm=True)
    o_tol = 1e-5 if HALF == torch.float32 else 2e-2  # outputs are rounded to the input dtype

    def check(o, s, s_tol=1e-5) -> tuple[float, float, str]:
        """Output and state error vs the fp32 recurrent form, as one number scaled to tol 1."""
        eo, es = rms_rel(o, truth_o), rms_rel(s, truth_s)
        return max(eo / o_tol, es / s_tol), 1.0, f"out {eo:.1e} state {es:.1e} (rms vs recurrent)"

    variants = ([("tf32x3", 16, None, 1e-4), ("tf32x3", 16, not (T > 64), 1e-4),
                 ("ieee", 16, None, 1e-5), ("tf32", 16, None, 1e-2), ("tf32x3", 32, None, 1e-4)]
                if DEV.type == "cuda" else [("ieee", 16, None, 1e-5), ("ieee", 16, True, 1e-5)])
    for prec, block_t, two_pass, s_tol in variants:
        def run(prec=prec, block_t=block_t, two_pass=two_pass):
            return gdn_tri.chunk_gated_delta_rule_triton(*args, use_qk_l2norm=True,
                                                         block_t=block_t, dot_precision=prec,
                                                         two_pass=two_pass)
        form = {None: "", True: "-2pass", False: "-fused"}[two_pass]
        record("gated_delta", shape, f"triton-{prec}-c{block_t}{form}", timed(run),
               *check(*run(), s_tol=s_tol))
    ref = lambda: gdn_ref.chunk_gated_delta_rule_reference(*args, use_qk_l2norm=True)  # noqa: E731
    record("gated_delta", shape, "reference-chunk16", timed(ref), *check(*ref()))
    try:
        from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule
    except ImportError:
        record("gated_delta", shape, "transformers-torch", None, None, None, "not installed")
        return
    hf = lambda: torch_chunk_gated_delta_rule(  # noqa: E731
        q, k, v, g=g, beta=beta, initial_state=s0, output_final_state=True,
        use_qk_l2norm_in_kernel=True)
    err, tol, note = check(*hf())
    record("gated_delta", shape, "transformers-torch", timed(hf), err, tol, note + ", chunk 64")


def run_kernels(dry_run: bool, reps: int | None, ops: list[str], save) -> dict:
    """Time and check `ops` (of OPS); save(doc) after each, so a killed run keeps what finished.
    Returns the doc: rows (op, shape, impl, ms, error, tol, ok, note) and ok (no disagreement)."""
    global DEV, REPS, HALF, conf_ref, conf_tri, attn_ref, attn_tri, gdn_ref, gdn_tri
    conf_ref, conf_tri, attn_ref, attn_tri, gdn_ref, gdn_tri = _import_kernels()
    DEV = torch.device("cpu" if dry_run else "cuda")
    REPS = reps or (1 if dry_run else 50)
    HALF = torch.float32 if dry_run else torch.bfloat16
    doc = dict(device=torch.cuda.get_device_name() if not dry_run else "cpu (interpreter)",
               reps=REPS, triton=importlib.import_module("triton").__version__, ops=list(ops),
               done=[], rows=ROWS)
    steps = {"confidence": [bench_confidence], "attention": [bench_attention],
             "gated_delta": [lambda: bench_gated_delta(32), lambda: bench_gated_delta(4096)]}
    for op in ops:
        for step in steps[op]:
            step()
            doc["ok"] = all(r["ok"] is not False for r in ROWS)
            save(doc)
        doc["done"].append(op)
    doc["ok"] = all(r["ok"] is not False for r in ROWS)
    return doc


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width table."""
    lines = [f"{'op':<16}{'shape':<34}{'impl':<25}{'ms':>10}{'error':>11}  ok"]
    for r in rows:
        ms = "-" if r["ms"] is None else f"{r['ms']:.3f}"
        err = "-" if r["error"] is None else f"{r['error']:.1e}"
        ok = "-" if r["ok"] is None else ("yes" if r["ok"] else "NO")
        lines.append(f"{r['op']:<16}{r['shape']:<34}{r['impl']:<25}{ms:>10}{err:>11}  {ok}  {r['note']}")
    return "\n".join(lines)
