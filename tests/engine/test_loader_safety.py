"""Config hygiene, no checkpoint code, and `hf:` downloads (engine/config_hygiene.py,
engine/loader.py, engine/hub.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clover_cli.engine.loader import ModelLoadError, load_model

def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_config(directory: Path, **changes) -> None:
    cfg = json.loads((directory / "config.json").read_text())
    cfg.update(changes)
    (directory / "config.json").write_text(json.dumps(cfg))


def _generate(clover, model: Path, real_process: bool):
    return clover("generate", "--model", str(model), "--raw", "--json", "--prompt", "def f(x):",
                  "--max-new-tokens", "6", real_process=real_process)


def test_sdar_with_flex_attention_and_friends_decodes(tiny_dirs, tmp_path, clover, real_process):
    """SDAR's released config carries these keys; the first decode forward used to crash the
    process (rc 134/139). The engine picks SDPA, its own dtype and cache use. (In-process, and
    slow in a real interpreter: a crash there is an exit code, not a dead test run.)"""
    d = _copy(tiny_dirs["sdar"], tmp_path / "sdar")
    _edit_config(d, attn_implementation="flex_attention", _attn_implementation="flash_attention_2",
                 torch_dtype="bfloat16", dtype="bfloat16", use_cache=False,
                 auto_map={"AutoConfig": "configuration_sdar.SDARConfig"})
    out = _generate(clover, d, real_process)
    assert out.exit_code == 0, out.stderr
    assert len(json.loads(out.stdout)["token_ids"]) == 6
    lm = load_model(str(d))
    assert lm.model.config._attn_implementation == "sdpa"
    assert str(next(lm.model.parameters()).dtype) == "torch.float32"  # CPU: ours, not bfloat16


def test_quantized_checkpoint_is_one_error_line(tiny_dirs, tmp_path, clover, real_process):
    """In-process, and (slow) in a real interpreter: nothing else reaches the real stderr."""
    d = _copy(tiny_dirs["clover"], tmp_path / "q")
    _edit_config(d, quantization_config={"quant_method": "gptq", "bits": 4})
    out = _generate(clover, d, real_process)
    assert out.exit_code == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clover: error:") and "gptq" in lines[0]


MARKER_CODE = """import pathlib
pathlib.Path({marker!r}).write_text("ran")
print("checkpoint code ran")
"""


def _with_remote_code(src: Path, dst: Path, marker: Path) -> Path:
    """A checkpoint whose config and tokenizer point at its own Python files, which would
    write `marker` (and print) if anything imported them."""
    d = _copy(src, dst)
    code = MARKER_CODE.format(marker=str(marker))
    (d / "configuration_evil.py").write_text(code + "from transformers import Qwen3Config\n"
                                             "class EvilConfig(Qwen3Config):\n    model_type = 'evil'\n")
    (d / "tokenization_evil.py").write_text(code + "from transformers import PreTrainedTokenizerFast\n"
                                            "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n")
    _edit_config(d, auto_map={"AutoConfig": "configuration_evil.EvilConfig",
                              "AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]})
    tok_cfg = json.loads((d / "tokenizer_config.json").read_text())
    tok_cfg["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}
    tok_cfg["tokenizer_class"] = "EvilTokenizer"
    (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    return d


def test_checkpoint_code_never_runs_and_nothing_asks(tiny_dirs, tmp_path, clover, real_process):
    """No "Do you wish to run the custom code?" prompt (stdin is closed or empty: a prompt would
    fail or hang, and its text would land on stdout), nothing on stdout but the JSON, and the
    checkpoint's Python never imported: in-process, and (slow) in a fresh interpreter."""
    marker = tmp_path / "MARKER"
    d = _with_remote_code(tiny_dirs["clover"], tmp_path / "evil", marker)
    out = clover("generate", "--model", str(d), "--raw", "--json", "--prompt", "x", "--max-new-tokens", "4",
                 real_process=real_process, timeout=120)
    assert not marker.exists()
    assert "custom code" not in out.stdout + out.stderr
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["token_ids"]  # stdout is exactly the JSON object
    lm = load_model(str(d))  # in process too
    assert not marker.exists() and lm.tokenizer.encode("x")


def test_hf_offline_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelLoadError, match=r"not in the local Hugging Face cache .*HF_HUB_OFFLINE=1"):
        load_model("hf:acme/absent")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(ModelLoadError, match=r"downloads are off \(--offline\)"):
        load_model("hf:acme/absent", offline=True)
