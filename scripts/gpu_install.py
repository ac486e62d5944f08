#!/usr/bin/env python
"""Install Clover on a lent GPU machine, offline, without touching its torch (docs/kernels.md,
"Running on a lent GPU"). Run it with the machine's own python3:

    python3 scripts/gpu_install.py --wheels wheels/gpu --venv /tmp/clover-venv

1. A fresh venv that sees what the base interpreter sees: --system-site-packages; and when the
   base is itself a venv, as the image's /opt/torch/.venv is, a .pth file that adds its
   site-packages (a venv made from a venv otherwise sees only the bottom interpreter's), with the
   system site-packages only if the base venv sees them.
2. From the wheels folder (scripts/gpu_wheels.py), `pip install --no-index --no-deps` of each
   distribution the base lacks; one it has is never installed over, whatever its version (so the
   image's torch, triton and transformers are the ones used). setuptools is installed into the
   venv when the base's is older than 77 (our pyproject's license field needs 77).
3. Our package from the working tree, `--no-deps --no-build-isolation` (pyproject pins torch and
   transformers versions the image does not have; nothing is resolved).
4. A check: `clover --version` and the versions in use, one line.
Exits non-zero with one line on the first failure.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_SETUPTOOLS = 77
# In the venv: which of these distributions are missing (setuptools: missing when too old).
MISSING = """
import importlib.metadata as md, json, sys
out = []
for name in json.loads(sys.argv[1]):
    try:
        v = md.version(name)
    except md.PackageNotFoundError:
        out.append(name)
        continue
    if name == "setuptools" and int(v.split(".")[0]) < %d:
        out.append(name)
print(json.dumps(out))
""" % MIN_SETUPTOOLS
REPORT = """
import json, sys, importlib.metadata as md
import clover_cli, torch
vs = {}
for n in ("torch", "triton", "transformers", "tokenizers", "safetensors", "numpy", "click"):
    try:
        vs[n] = md.version(n)
    except md.PackageNotFoundError:
        vs[n] = None
print(json.dumps(dict(clover_cli=clover_cli.__file__, python=sys.version.split()[0],
                      cuda=torch.cuda.is_available(), versions=vs)))
"""


def fail(msg: str) -> None:
    sys.exit(f"gpu_install: {msg}")


def run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    """Run cmd; its stdout, or exit with one line naming `what` and the last line of stderr."""
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        fail(f"{what} failed ({proc.returncode}): {last}")
    return proc.stdout


def base_sees_system_site() -> bool:
    """Whether this interpreter sees the system site-packages (always, unless it is a venv made
    without --system-site-packages)."""
    if sys.prefix == sys.base_prefix:
        return True
    cfg = Path(sys.prefix, "pyvenv.cfg").read_text().splitlines()
    return any(line.replace(" ", "").lower() == "include-system-site-packages=true" for line in cfg)


def make_venv(path: Path) -> Path:
    """A fresh venv that sees what this interpreter sees; returns its python."""
    venv.EnvBuilder(system_site_packages=base_sees_system_site(), with_pip=False, clear=True,
                    symlinks=True).create(path)
    py = path / "bin" / "python"
    if sys.prefix != sys.base_prefix:  # this interpreter is a venv: add its site-packages
        dirs = [d for d in site.getsitepackages() if Path(d).is_relative_to(sys.prefix)]
        purelib = json.loads(run([str(py), "-c", "import json, sysconfig; "
                                  "print(json.dumps(sysconfig.get_paths()['purelib']))"], "venv"))
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
        Path(purelib, "_clover_base_site.pth").write_text(lines)
    return py


def wheel_names(folder: Path) -> list[str]:
    """The distribution names of the wheels in folder (each once)."""
    names = {w.name.split("-")[0].replace("_", "-").lower() for w in folder.glob("*.whl")}
    return sorted(names)


def install(py: Path, wheels: Path | None, repo: Path) -> list[str]:
    """Install the missing wheels, then our package; returns the wheels installed."""
    pip = [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir"]
    missing: list[str] = []
    if wheels is not None:
        missing = json.loads(run([str(py), "-c", MISSING, json.dumps(wheel_names(wheels))],
                                 "checking the base's packages"))
        if missing:
            run(pip + ["--find-links", str(wheels), *missing], "installing wheels")
    fresh = [p for p in (repo / "build", repo / "clover_cli.egg-info") if not p.exists()]
    try:
        run(pip + ["--no-build-isolation", str(repo)], f"installing clover from {repo}")
    finally:
        for p in fresh:  # the in-tree build's leftovers, only those this run made
            shutil.rmtree(p, ignore_errors=True)
    return missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, default=Path("/tmp/clover-venv"))
    ap.add_argument("--wheels", type=Path, default=None, help="folder of wheels (gpu_wheels.py)")
    ap.add_argument("--repo", type=Path, default=ROOT)
    args = ap.parse_args()
    if args.wheels is not None and not args.wheels.is_dir():
        fail(f"no wheels folder {args.wheels} (make it here with scripts/gpu_wheels.py and carry it)")
    run([sys.executable, "-m", "pip", "--version"], "finding pip in the base interpreter")
    py = make_venv(args.venv.resolve())
    installed = install(py, args.wheels, args.repo.resolve())
    version = run([str(py.parent / "clover"), "--version"], "clover --version").strip()
    # from the venv's folder: `python -c` in the checkout would import its clover_cli/ folder
    report = json.loads(run([str(py), "-c", REPORT], "importing clover_cli and torch", cwd=py.parent))
    report.update(venv=str(py), clover=version, installed_wheels=installed)
    print("gpu_install: " + json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
