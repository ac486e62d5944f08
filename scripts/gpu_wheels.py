#!/usr/bin/env python
"""Download, here where PyPI is reachable, the wheels a lent GPU machine lacks (docs/kernels.md,
"Running on a lent GPU"); scripts/gpu_install.py installs them there, offline.

The lent machine is a bare image (Python 3.12, torch, triton, transformers and ~200 packages,
IMAGE_HAS) with no package index. What it lacks is the closure of pyproject's dependencies minus
IMAGE_HAS, plus setuptools (the image's may be too old to build our pyproject); each is pinned
to the version installed in the interpreter running this script, the project venv, so the GPU
runs what the tests ran. Run it with the project venv:

    .venv/bin/python scripts/gpu_wheels.py                 # wheels/gpu: cp312 manylinux x86_64
    .venv/bin/python scripts/gpu_wheels.py --dry-run-set   # wheels/dry-run: this Python, plus a
        # stand-in for the image (torch 2.13 from local disk; transformers, tokenizers, triton ...
        # at the image's versions, IMAGE_PINS) for the fresh-venv dry run
        # (tests/kernels/test_kernel_gpu_bench_dry_run.py)

wheels/ is git-ignored; wheels/gpu travels to the GPU as a carry path (64 MiB with the tree).
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The lent GPU image's Python packages, as read on it (2026-11-17); they are never carried.
IMAGE_HAS = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio
attrs botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax
e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-ml-py onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich
sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece
sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
# The image's versions of what our code path uses there (its pip list), for the dry-run stand-in;
# numpy below 2.4 there (the image has 2.5.2): triton 3.6's interpreter calls int() on one-element
# arrays, which numpy 2.4 refuses, and only the dry run interprets (the GPU compiles).
IMAGE_PINS = ["transformers==5.17.0", "tokenizers==0.23.2", "safetensors==0.8.0",
              "huggingface-hub==1.33.0", "accelerate==1.15.0", "triton==3.6.0", "numpy<2.4"]
ALWAYS = ["setuptools"]  # builds our package there (pyproject's SPDX license needs >= 77)
NEVER = {"torch", "triton", "transformers"}  # the image's own, never replaced (and far too big)
MANYLINUX = [f"manylinux_2_{n}_x86_64" for n in range(17, 29)] + ["manylinux2014_x86_64",
                                                                   "manylinux1_x86_64"]


def norm(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(requirements: list[str], python: str) -> dict[str, str]:
    """Every distribution the requirements need (markers for Linux x86_64 and `python`), with the
    version installed here: {normalised name: version}."""
    from packaging.requirements import Requirement

    env = {"python_version": python, "python_full_version": python + ".0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "extra": ""}
    found: dict[str, str] = {}
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        name = norm(req.name)
        if name in found or (req.marker and not req.marker.evaluate(env)):
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            sys.exit(f"gpu_wheels: {req.name} is not installed here; run this with the project venv")
        found[name] = dist.version
        stack.extend(Requirement(r) for r in dist.requires or [])
    return found


def carry_set(python: str) -> list[str]:
    """`name==version` for what the GPU image lacks, plus ALWAYS."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    image = {norm(n) for n in IMAGE_HAS}
    need = closure(deps, python)
    names = sorted(n for n in need if n not in image and n not in NEVER)
    names += [n for n in ALWAYS if n not in names]
    return [f"{n}=={md.version(n)}" for n in names]


def image_standin(python: str) -> list[str]:
    """The dry run's stand-in for the image: torch 2.13 (local disk here), IMAGE_PINS, and the
    rest of our closure that the image has, unpinned (pip resolves them with their needs)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    image = {norm(n) for n in IMAGE_HAS}
    pinned = {norm(re.split("[=<>]", p)[0]) for p in IMAGE_PINS}
    rest = sorted(n for n in closure(deps, python) if n in image and n not in pinned | {"torch"})
    return ["torch==2.13.0", *IMAGE_PINS, *rest]


def download(reqs: list[str], dest: Path, python: str, *, deps: bool) -> None:
    """pip download binary wheels for CPython `python` on manylinux x86_64 into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    tag = python.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(dest),
           "--python-version", python, "--implementation", "cp",
           "--abi", f"cp{tag}", "--abi", "abi3", "--abi", "none"]
    for plat in MANYLINUX:
        cmd += ["--platform", plat]
    if not deps:
        cmd.append("--no-deps")
    proc = subprocess.run(cmd + reqs)
    if proc.returncode:
        sys.exit(f"gpu_wheels: pip download failed ({proc.returncode}) for {' '.join(reqs)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run-set", action="store_true",
                    help="wheels/dry-run for this Python: the carry set plus the image stand-in")
    ap.add_argument("--dest", type=Path, default=None, help="default: wheels/gpu or wheels/dry-run")
    ap.add_argument("--python-version", default=None, help="default: 3.12, or this Python's")
    args = ap.parse_args()
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = args.python_version or (here if args.dry_run_set else "3.12")
    dest = args.dest or ROOT / "wheels" / ("dry-run" if args.dry_run_set else "gpu")
    for old in dest.glob("*.whl"):  # one version of each: pip takes the highest it finds
        old.unlink()
    carry = carry_set(python)
    print(f"carry ({len(carry)}): {' '.join(carry)}")
    download(carry, dest, python, deps=False)
    if args.dry_run_set:
        standin = image_standin(python)
        print(f"image stand-in (with their needs): {' '.join(standin)}")
        download(standin, dest, python, deps=True)
    wheels = sorted(dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}: "
          f"{len(wheels)} wheels, {size:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
