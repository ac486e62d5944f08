"""The lent-GPU recipe (docs/kernels.md, "Running on a lent GPU") on this CPU: a copy of the tree as
the device tool sends it, scripts/gpu_install.py into a venv over a base interpreter, then
scripts/gpu_bench.py --dry-run (tiny shapes, TRITON_INTERPRET=1) writing one file per section."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRY_WHEELS = ROOT / "wheels" / "dry-run"  # scripts/gpu_wheels.py --dry-run-set (needs PyPI)


def copy_tree(dest: Path) -> Path:
    """Tracked and untracked-not-ignored files, as the device tool copies the working tree."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file():
            (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            (dest / os.fsdecode(name)).write_bytes(src.read_bytes())
    return dest


def make_wheel(folder: Path, name: str, version: str, module: str) -> None:
    """A minimal pure-python wheel of `name` holding `module`.py."""
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
        z.writestr(f"{module}.py", "VALUE = 42\n")
        z.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                              "Tag: py3-none-any\n")
        z.writestr(f"{dist}.dist-info/RECORD", "")


def install(base_python: str, tree: Path, wheels: Path, venv: Path) -> dict:
    proc = subprocess.run([base_python, str(tree / "scripts" / "gpu_install.py"), "--wheels", str(wheels),
                           "--venv", str(venv)], capture_output=True, text=True, timeout=600, cwd=tree)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout.split("gpu_install: ", 1)[1])


def dry_run(venv: Path, tree: Path, out: Path) -> tuple[dict, dict]:
    proc = subprocess.run([str(venv / "bin" / "python"), str(tree / "scripts" / "gpu_bench.py"), "--dry-run",
                           "--out", str(out)], capture_output=True, text=True, timeout=900, cwd=tree)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    return summary, {n: json.loads((out / f"{n}.json").read_text()) for n in summary["sections"]}


def check_dry_run(summary: dict, docs: dict, venv: Path) -> None:
    assert summary["ok"] is True and summary["dry_run"] is True
    assert list(summary["sections"]) == ["generate", "kernels", "model", "session"]
    assert all(e["status"] == "done" and e["complete"] for e in summary["sections"].values())
    assert summary["environment"]["clover_cli"].startswith(str(venv))  # the installed copy
    gen = docs["generate"]  # the product path, run through the installed `clover` script
    assert gen["command"].startswith(str(venv / "bin" / "clover") + " generate")
    assert [r["run"] for r in gen["runs"]] == ["compile", "cached"] and gen["ok"] is True
    last = gen["runs"][-1]
    assert (last["device"], last["dtype"], last["kernels"]) == ("cpu", "float32", ["block_attention"])
    assert last["forwards"] > 0 and last["forwards_per_second"] > 0
    impls = {(r["op"], r["impl"]) for r in docs["kernels"]["rows"]}
    assert {("confidence", "triton"), ("block_attention", "triton"),
            ("gated_delta", "triton-ieee-c16")} <= impls
    assert all(r["ok"] is not False for r in docs["kernels"]["rows"])
    model = docs["model"]  # the SDAR-shaped section, shrunk, on generate's checkpoint
    assert model["attn_implementation"] == "sdpa" and model["layers"] == 2
    assert model["checkpoint_reused"] is True
    assert all(model[f"t_fwd_{t}_ms"] > 0 for t in (1, 32, 64)) and model["decode_tokens"] == 32
    session = docs["session"]  # the session replay, shrunk: 3 steps cold and warm on the CPU
    assert session["shape"] == "dry-run" and session["prefix_reuse"] is True
    assert [r["step"] for r in session["steps"]] == [1, 2, 3] and session["identical_ids"] is True
    assert session["targets"]["prefill_bounded"]["ok"] is True


@pytest.mark.slow
@pytest.mark.timeout(900)  # two installs' worth of subprocesses on a loaded 2-core machine
def test_install_over_a_venv_then_dry_run_writes_every_section(tmp_path):
    """Base: this project's venv (a venv, as the GPU image's python3 is). The install adds a wheel
    the base lacks and leaves alone one it has (a decoy torch), then the dry run passes."""
    tree = copy_tree(tmp_path / "tree")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "clover-probe-dist", "1.0", "clover_probe_mod")
    make_wheel(wheels, "torch", "0.0.1", "torch_decoy")  # the base has torch: never installed over
    venv = tmp_path / "venv"
    report = install(sys.executable, tree, wheels, venv)
    import torch

    assert report["installed_wheels"] == ["clover-probe-dist"]
    assert report["versions"]["torch"] == torch.__version__
    assert report["clover_cli"].startswith(str(venv)) and report["clover"].startswith("clover")
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import clover_probe_mod, torch; "
                            "print(clover_probe_mod.VALUE, torch.__file__)"], capture_output=True, text=True)
    assert probe.stdout.split()[0] == "42" and not probe.stdout.split()[1].startswith(str(venv))
    check_dry_run(*dry_run(venv, tree, tmp_path / "out"), venv)


@pytest.mark.slow
@pytest.mark.timeout(1500)  # installs torch into a fresh venv
@pytest.mark.skipif(not DRY_WHEELS.is_dir(), reason="no wheels/dry-run (scripts/gpu_wheels.py --dry-run-set)")
def test_fresh_venv_with_only_torch_installs_from_wheels_and_dry_runs(tmp_path):
    """Base: a fresh venv with torch alone; everything else (transformers, tokenizers and triton at
    the GPU image's versions, and what the image lacks) comes from the wheels folder."""
    tree = copy_tree(tmp_path / "tree")
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    subprocess.run([str(base / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index",
                    "--find-links", str(DRY_WHEELS), "torch==2.13.0"], check=True, timeout=600)
    venv = tmp_path / "venv"
    report = install(str(base / "bin" / "python"), tree, DRY_WHEELS, venv)
    assert report["versions"]["transformers"] == "5.17.0" and report["versions"]["triton"] == "3.6.0"
    assert "torch" not in report["installed_wheels"]
    check_dry_run(*dry_run(venv, tree, tmp_path / "out"), venv)
