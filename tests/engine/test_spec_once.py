"""The model spec is parsed once, at the command boundary, into a typed ModelSpec that the
loader and the backends take as it is (engine/spec.py)."""
from __future__ import annotations

import subprocess
import sys

from clover_cli.engine.spec import ModelSpec, parse_spec


def test_a_typed_spec_loads_without_being_parsed_again(tiny_dirs, monkeypatch):
    from clover_cli.agent.backends import make_backend
    from clover_cli.engine import spec as spec_module

    parsed = parse_spec(str(tiny_dirs["clover"]))
    assert isinstance(parsed, ModelSpec) and parsed.kind == "dir"

    def refuse(_):
        raise AssertionError("a typed spec was turned back into a string and parsed again")

    monkeypatch.setattr(spec_module, "parse_spec", refuse)
    backend = make_backend(parsed)
    assert backend.lm.family.name == "clover"


def test_generate_offline_flag_refuses_an_uncached_hf_model(tmp_path):
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "clover_cli.cli", "generate", "--model", "hf:acme/none",
                          "--prompt", "x", "--offline"], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"clover: error: hf:acme/none is not in the local Hugging Face cache ({tmp_path / 'hub'}) "
        "and downloads are off (--offline)"]
