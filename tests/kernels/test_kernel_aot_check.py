"""The kernels compile for an sm_90 GPU target on this driverless machine (kernels.aot_check)."""
import os
import subprocess
import sys

import pytest


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-m", "clover_cli.kernels.aot_check", *args],
                          capture_output=True, text=True, env=env, timeout=240)


@pytest.mark.slow  # a fresh interpreter compiling for sm90; the kernels' numerics run in the interpreter tests
def test_commit_kernel_compiles_for_sm90():
    proc = _run("--only", "confidence.commit")
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("confidence.commit"))
    assert " ok " in line and "registers" in line


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90():
    proc = _run()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    names = [l.split()[0] for l in proc.stdout.splitlines() if l.strip()]
    assert {"confidence.row_partials", "block_attention.split", "gated_delta.tf32x3"} <= set(names)
