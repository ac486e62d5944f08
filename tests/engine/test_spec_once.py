"""The model spec is parsed once, at the command boundary, into a typed ModelSpec that the
loader and the backends take as it is (engine/spec.py)."""
from __future__ import annotations

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


def test_generate_offline_flag_refuses_an_uncached_hf_model(tmp_path, monkeypatch, clover):
    """In-process (tests/engine/conftest.py); the environment does not turn the hub off, so the
    flag is what refuses, and a download attempt would be a different line."""
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)

    def no_download(*args, **kwargs):
        raise AssertionError("--offline still asked for a download")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_download)
    out = clover("generate", "--model", "hf:acme/none", "--prompt", "x", "--offline")
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"clover: error: hf:acme/none is not in the local Hugging Face cache ({tmp_path / 'hub'}) "
        "and downloads are off (--offline)"]
