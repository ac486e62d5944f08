"""`clover models` on this machine (engine/catalog.py, clover_cli/commands/models_cmd.py): a row
for each checkpoint users run, sizes that follow from the parameter counts, the CPU column, the
cache column; and the one-line demo notice `clover run` gives on the bundled `tiny`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clover_cli.engine.catalog import CATALOG, DEMO_NOTICE, dense_params

REQUIRED = ["JetLM/SDAR-1.7B-Chat", "JetLM/SDAR-4B-Chat", "JetLM/SDAR-8B-Chat",
            "Efficient-Large-Model/Fast_dLLM_v2_1.5B", "Efficient-Large-Model/Fast_dLLM_v2_7B",
            "inclusionAI/LLaDA2.0-mini", "Dream-org/Dream-v0-Instruct-7B", "GSAI-ML/LLaDA-8B-Instruct",
            "google/diffusiongemma-26B-A4B-it", "Qwen/Qwen3-Next-80B-A3B-Instruct"]


def _models(tmp_path, *args):
    cache = tmp_path / "hub"
    # a whole SDAR-1.7B snapshot (its files, not its weights: the cache column only looks) and a
    # Dream download cut off before its weights
    whole = cache / "models--JetLM--SDAR-1.7B-Chat" / "snapshots" / "abc"
    whole.mkdir(parents=True)
    (whole / "config.json").write_text("{}")
    (whole / "model.safetensors").write_bytes(b"")
    cut = cache / "models--Dream-org--Dream-v0-Instruct-7B" / "snapshots" / "abc"
    cut.mkdir(parents=True)
    (cut / "config.json").write_text("{}")
    (cut / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "model-1.safetensors"}}))
    from in_process import clover

    out = clover("models", *args, env={"HF_HUB_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_models_json_rows_sizes_and_cpu_fit(tmp_path):
    report = json.loads(_models(tmp_path, "--json"))
    rows = {r["repo"]: r for r in report["checkpoints"]}
    assert set(REQUIRED) <= set(rows)
    assert [d["device"] for d in report["devices"]][-1] == "cpu"
    cpu = next(d for d in report["devices"] if d["device"] == "cpu")
    for row in rows.values():
        assert row["spec"] == "hf:" + row["repo"] and row["source"]
        formats = ["float32", "bfloat16"] + report["quantized_formats"]
        assert set(row["bytes"]) == set(formats) and set(row["fits"]) == {d["device"] for d in report["devices"]}
        fit = row["fits"]["cpu"]
        if row["params"] is None:  # unknown size: never a guess
            assert row["params_from"] is None and row["bytes"]["bfloat16"] is None and fit["fits"] is None
            continue
        assert row["bytes"]["bfloat16"] == 2 * row["params"] + row["fixed_bytes"]
        assert row["bytes"]["float32"] == 4 * row["params"] + row["fixed_bytes"]
        if fit["fits"]:
            assert fit["as"] in formats and fit["need_bytes"] <= cpu["free_bytes"]
            assert fit["need_bytes"] > row["bytes"][fit["as"]]  # the engine's need is on top
        elif fit["fits"] is False:
            assert fit["need_bytes"] > cpu["free_bytes"]
    assert rows["JetLM/SDAR-1.7B-Chat"]["cached"] == "yes"
    assert rows["Dream-org/Dream-v0-Instruct-7B"]["cached"] == "partial"
    assert rows["JetLM/SDAR-8B-Chat"]["cached"] is None
    assert rows["Qwen/Qwen3-Next-80B-A3B-Instruct"]["config"]["layer_types"].count("full_attention") == 12


def test_models_table_has_a_row_per_checkpoint_and_the_cpu_column(tmp_path):
    lines = _models(tmp_path).splitlines()
    head = lines[0].split()
    assert head[:3] == ["family", "spec", "params"] and "cpu" in head and "cached" in head
    for repo in REQUIRED:
        (row,) = [line for line in lines if f" hf:{repo} " in line]
        assert row.split()[-1] in ("yes", "no", "?") or row.rstrip().endswith(")")
    assert any(line.startswith("Free memory now: cpu (CPU) ") for line in lines)


def test_catalog_figures_follow_from_their_configs():
    """Every dense entry's count is the formula on its stored config; the "index" entries, whose
    figures came from the releases' safetensors indexes, check the formula itself."""
    for c in CATALOG:
        assert c.params is None or c.bytes_in(2) == 2 * c.params + c.fixed_bytes
        if c.params_from == "index" or (c.params_from == "config" and c.family in ("sdar", "fast_dllm_v2")):
            assert dense_params(c.config) == c.params, c.repo


@pytest.mark.slow
def test_moe_counts_are_the_networks_built_from_their_configs():
    """The mixture-of-experts figures: the networks on the meta device (scripts/catalog_counts.py)."""
    out = subprocess.run([sys.executable, "scripts/catalog_counts.py"], capture_output=True, text=True,
                         timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "DIFFERS" not in out.stdout and out.stdout.count(" ok") >= 4


def test_clover_run_on_tiny_says_it_is_a_demo_once_on_stderr(tmp_path):
    from in_process import clover

    (tmp_path / "repo").mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"completions": ["Hello."]}))
    tiny = clover("run", "hi", "--model", "tiny", "--root", str(tmp_path / "repo"), "--max-steps", "1",
                  "--max-new-tokens", "8", "--json")
    assert tiny.stderr.splitlines().count(f"clover run: note: {DEMO_NOTICE}") == 1
    assert "clover models" not in tiny.stdout  # --json's stdout stays the event stream
    other = clover("run", "hi", "--model", f"replay:{script}", "--root", str(tmp_path / "repo"), "--json")
    assert other.returncode == 0 and DEMO_NOTICE not in other.stderr


def test_each_gpu_gets_a_column_in_its_own_precision_and_quantized_formats_count(monkeypatch):
    """A machine described (engine/placement.py's Machine, as the placement tests do): a 16 GiB
    Ada card runs bfloat16, a Turing card float16, both before the CPU; a quantized format, once
    engine/fit.py lists one, has a size column and is what fits when nothing wider does."""
    from clover_cli.commands.models_cmd import _report, _table
    from clover_cli.engine import fit
    from clover_cli.engine.placement import CudaDevice, Machine

    gib = 1 << 30
    machine = Machine(cuda=(CudaDevice(0, "Ada", (8, 9), 16 * gib), CudaDevice(1, "T4", (7, 5), 16 * gib)),
                      cuda_build="13.0", free_bytes={"cuda:0": 16 * gib, "cuda:1": 16 * gib, "cpu": 8 * gib})
    for fmt in list(fit.QUANTIZED_BYTES_PER_PARAM):  # first with no quantized format at all
        monkeypatch.delitem(fit.QUANTIZED_BYTES_PER_PARAM, fmt)
    rows = {r["repo"]: r for r in _report(machine)["checkpoints"]}
    assert list(rows["JetLM/SDAR-4B-Chat"]["fits"]) == ["cuda:0", "cuda:1", "cpu"]
    assert rows["JetLM/SDAR-4B-Chat"]["fits"]["cuda:0"]["as"] == "bfloat16"
    assert rows["JetLM/SDAR-4B-Chat"]["fits"]["cuda:1"]["as"] == "float16"
    assert rows["JetLM/SDAR-8B-Chat"]["fits"]["cuda:0"]["fits"] is False  # 15.3 GiB + the engine's need
    monkeypatch.delitem(fit.QUANTIZED_BYTES_PER_PARAM, "int8", raising=False)  # one format, at a set size
    monkeypatch.setitem(fit.QUANTIZED_BYTES_PER_PARAM, "int4", 0.5625)
    report = _report(machine)
    sdar8 = next(r for r in report["checkpoints"] if r["repo"] == "JetLM/SDAR-8B-Chat")
    assert report["quantized_formats"] == ["int4"] and sdar8["bytes"]["int4"] < sdar8["bytes"]["bfloat16"] // 2
    assert sdar8["fits"]["cuda:0"]["as"] == "int4"
    head = _table(report).splitlines()[0].split()
    assert head[-4:] == ["cached", "cuda:0", "cuda:1", "cpu"] and "int4" in head
