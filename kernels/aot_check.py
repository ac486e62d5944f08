"""Compile every Triton kernel for a GPU target without a GPU, and report registers and spills.

    python -m clover_cli.kernels.aot_check [--arch 90] [--only gated_delta]

A machine without a CUDA driver cannot launch kernels, but triton can still lower them to a
cubin (it ships ptxas). This catches compile errors the interpreter does not (dot shapes,
layouts, unsupported ops) and shows register pressure: spill bytes per thread are what
ptxas reports for the launch settings the public functions use on CUDA (mirrored below).
Must run without TRITON_INTERPRET (interpreted kernels cannot be compiled).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile

PKG = (__spec__.name if __spec__ else __name__).rsplit(".", 1)[0]  # works under python -m

# name: (module, kernel, non-i32 argument types, constexprs, num_warps); the CUDA launch defaults
CONFIGS = {
    "confidence.row_partials": ("confidence.triton_kernel", "_row_partials_kernel",
                                {"x_ptr": "*bf16", "m_ptr": "*fp32", "s_ptr": "*fp32",
                                 "i_ptr": "*i32"},
                                {"HAS_MASK": True, "NSPLIT": 8, "BLOCK_V": 1024}, 4),
    "confidence.commit": ("confidence.triton_kernel", "_commit_kernel",
                          {"m_ptr": "*fp32", "s_ptr": "*fp32", "i_ptr": "*i32", "masked_ptr": "*i8",
                           "tok_ptr": "*i64", "conf_ptr": "*fp32", "commit_ptr": "*i8",
                           "threshold": "fp32"},
                          {"NSPLIT": 8, "BLOCK_L": 32, "BLOCK_S": 8}, 4),
    **{f"block_attention.{'split' if split else 'direct'}": (
        "block_attention.triton_kernel", "_block_attention_kernel",
        {**{p: "*bf16" for p in ("q_ptr", "kc_ptr", "vc_ptr", "kb_ptr", "vb_ptr", "o_ptr")},
         "ws_ptr": "*fp32", "lse_ptr": "*fp32", "qk_scale": "fp32"},
        {"SPLIT": split, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": 128, "DOT_PREC": "tf32"}, 8)
        for split in (True, False)},
    "block_attention.combine": ("block_attention.triton_kernel", "_combine_kernel",
                                {"ws_ptr": "*fp32", "lse_ptr": "*fp32", "o_ptr": "*bf16"},
                                {"BLOCK_M": 16, "BLOCK_D": 128}, 4),
    **{f"gated_delta.{prec}": (
        "gated_delta.triton_kernel", "_gated_delta_kernel",
        {**{p: "*bf16" for p in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")},
         **{p: "*fp32" for p in ("g_ptr", "b_ptr", "s0_ptr", "sf_ptr")}, "scale": "fp32"},
        {"HAS_STATE": True, "STORE_STATE": True, "L2NORM": True, "BT": 16, "BK": 128, "BV": 32,
         "DOT_PREC": prec}, 8) for prec in ("tf32x3", "ieee")},
    "gated_delta.prepare": ("gated_delta.triton_kernel", "_prepare_kernel",
                            {**{p: "*bf16" for p in ("q_ptr", "k_ptr", "v_ptr")},
                             **{p: "*fp32" for p in ("g_ptr", "b_ptr", "w_ptr", "u_ptr", "a_ptr",
                                                     "qd_ptr", "kd_ptr", "d_ptr")},
                             "scale": "fp32"},
                            {"L2NORM": True, "BT": 16, "BK": 128, "BDV": 128,
                             "DOT_PREC": "tf32x3"}, 8),
    "gated_delta.scan": ("gated_delta.triton_kernel", "_scan_kernel",
                         {**{p: "*fp32" for p in ("w_ptr", "u_ptr", "a_ptr", "qd_ptr", "kd_ptr",
                                                  "d_ptr", "s0_ptr", "sf_ptr")},
                          "o_ptr": "*bf16"},
                         {"HAS_STATE": True, "STORE_STATE": True, "BT": 16, "BK": 128, "BV": 32,
                          "DOT_PREC": "tf32x3"}, 8),
}


def compile_one(name: str, arch: int = 90) -> dict:
    """Compile one configuration; returns {name, ok, error, registers, stack_bytes}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module, kernel, types, constexprs, warps = CONFIGS[name]
    fn = getattr(importlib.import_module(f"{PKG}.{module}"), kernel)
    if not hasattr(fn, "arg_names"):
        raise RuntimeError("kernels are interpreted (TRITON_INTERPRET=1); unset it to compile")
    signature = {a: ("constexpr" if a in constexprs else types.get(a, "i32")) for a in fn.arg_names}
    row = dict(name=name, ok=False, error=None, registers=None, stack_bytes=None)
    try:
        compiled = triton.compile(ASTSource(fn, signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    except Exception as exc:  # a compile error is the finding, reported as data
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return row
    row["ok"] = True
    row.update(_resource_usage(compiled.asm.get("cubin")))
    return row


def _resource_usage(cubin: bytes | None) -> dict:
    """Registers and stack (spill) bytes per thread from cuobjdump, when the tool is there."""
    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not cubin or not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    regs, stack = re.search(r"REG:(\d+)", out), re.search(r"STACK:(\d+)", out)
    return dict(registers=int(regs.group(1)) if regs else None,
                stack_bytes=int(stack.group(1)) if stack else None)


def main(argv: list[str] | None = None) -> int:
    """Compile the selected configurations and print one line each; 1 if any fails."""
    ap = argparse.ArgumentParser(description="compile the Triton kernels for a GPU target")
    ap.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90 for H100")
    ap.add_argument("--only", default="", help="prefix of the configurations to compile")
    args = ap.parse_args(argv)
    failed = False
    for name in CONFIGS:
        if not name.startswith(args.only):
            continue
        row = compile_one(name, args.arch)
        failed |= not row["ok"]
        detail = row["error"] or f"registers {row['registers']}  stack {row['stack_bytes']} B"
        print(f"{name:<28}{'ok' if row['ok'] else 'FAIL':<6}{detail}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
