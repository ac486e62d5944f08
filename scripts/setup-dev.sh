#!/usr/bin/env bash
# Install Clover with its test extras into ./.venv, plus tmux (terminal smoke test), ripgrep (grep tool)
# and bubblewrap (the shell sandbox, docs/security.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tmux >/dev/null 2>&1 || ! command -v rg >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux ripgrep bubblewrap) >/dev/null \
            || echo "warning: could not install tmux, ripgrep and bubblewrap; their tests will be skipped" >&2
    else
        echo "warning: tmux, ripgrep or bubblewrap missing; their tests will be skipped" >&2
    fi
fi
bash scripts/install.sh --dev
# flash-linear-attention's reference ops (fla-core), the kernel tests' independent oracle, in a folder
# of their own: installed in the venv, `fla` is imported by transformers' Qwen3-Next layers, which then
# run fla's Triton kernels in place of their torch path (tests/kernels/test_kernel_gated_delta_fla.py);
# torchao likewise, the oracle of our int8 scheme: installed, transformers imports it on every model
# load (+3.3 s, engine/quantize.py) (tests/engine/conformance/test_quantized.py)
.venv/bin/python -m pip install -q --no-deps --upgrade --target .venv/oracles fla-core==0.6.0 einops==0.8.2 torchao==0.18.0
