"""The engine on the Triton kernels (run by the Triton interpreter on CPU) decodes the same
tokens as on the torch reference path, for an attention model and a GDN hybrid."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import load_model

SCRIPT = """
import json, sys
from clover_cli.engine.loader import load_model
from clover_cli.engine.engine import Engine
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine import kernel_hooks
lm = load_model(sys.argv[1])
eng = Engine(lm, use_kernels=True)
r = eng.generate(list(range(20, 33)), GenerationConfig(max_new_tokens=16, threshold=0.6))
print(json.dumps({"ids": list(r.token_ids), "installed": eng.kernels, "calls": dict(kernel_hooks.CALLS)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["clover", "hybrid"])
def test_triton_path_matches_reference_path(tiny_dirs, kind):
    env = dict(os.environ, TRITON_INTERPRET="1", CLOVER_FORCE_TRITON="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_dirs[kind])], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "block_attention" in got["installed"]
    assert got["calls"]["block_attention"] > 0 and got["calls"]["sdpa"] > 0
    if kind == "hybrid":
        assert got["calls"]["gated_delta"] > 0
    lm = load_model(str(tiny_dirs[kind]))
    ref = Engine(lm, use_kernels=False).generate(list(range(20, 33)),
                                                 GenerationConfig(max_new_tokens=16, threshold=0.6))
    assert got["ids"] == list(ref.token_ids)


def test_no_hooks_on_cpu_by_default(tiny_dirs):
    lm = load_model(str(tiny_dirs["clover"]))
    assert Engine(lm).kernels == []
