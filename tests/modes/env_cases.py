"""Things the environment tests build: a local wheel, a shallow clone, fake pyenv/uv folders,
a src-layout toy project and an interpreter with an installed copy of it. Nothing is fetched."""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from modes_helpers import git

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
REAL_PYTHON = Path(os.path.realpath(sys.executable))


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel holding `files` (path in site-packages -> text); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {**files,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def fake_pytest_wheel(folder: Path) -> Path:
    """A stand-in `pytest` (import works, `python -m pytest --version` exits 0): installs
    offline in a second, and is enough for an environment to verify."""
    return make_wheel(folder, "pytest", "0.0.1", {
        "pytest/__init__.py": "__version__ = '0.0.1'\n",
        "pytest/__main__.py": "import sys\nprint('pytest 0.0.1 (test stand-in)')\nsys.exit(0)\n"})


def shallow_clone_lacking_setup_commit(tmp: Path, requirements: str) -> tuple[Path, str, str]:
    """(shallow clone `owner__name`, setup commit missing from it, base commit it has): the
    requirements file is committed at the setup commit and unchanged at the base commit."""
    origin = tmp / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    git(origin, "config", "user.email", "t@example.com")
    git(origin, "config", "user.name", "Test")
    git(origin, "config", "commit.gpgsign", "false")
    (origin / "requirements.txt").write_text(requirements)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "requirements")
    setup = git(origin, "rev-parse", "HEAD")
    (origin / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "calc")
    base = git(origin, "rev-parse", "HEAD")
    clone = tmp / "pallets__flask"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(clone)],
                   check=True, capture_output=True)
    return clone, setup, base


def link_python(bin_dir: Path, *names: str) -> Path:
    """Symlinks named `names` in `bin_dir` to the real interpreter running the tests."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        (bin_dir / name).symlink_to(REAL_PYTHON)
    return bin_dir / names[0]


TOY = "def add(a, b):\n    return a - b\n"
TOY_TEST = "from toy import add\n\n\ndef test_small():\n    assert add(0, 0) == 0\n"


def make_src_layout_repo(path: Path) -> str:
    """acme/toy in a src layout: src/toy/__init__.py whose add() subtracts; base commit."""
    (path / "src" / "toy").mkdir(parents=True)
    (path / "tests").mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "Test")
    git(path, "config", "commit.gpgsign", "false")
    (path / "src" / "toy" / "__init__.py").write_text(TOY)
    (path / "tests" / "test_toy.py").write_text(TOY_TEST)
    (path / "pyproject.toml").write_text("[project]\nname = 'toy'\nversion = '0'\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "toy")
    return git(path, "rev-parse", "HEAD")


def interpreter_with_installed_toy(folder: Path) -> Path:
    """A venv (the user's `--python`) with its own installed copy of toy (the buggy add) and the
    test runner's site-packages (pytest) visible through a .pth; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   capture_output=True)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "toy").mkdir()
    (Path(site) / "toy" / "__init__.py").write_text(TOY)
    (Path(site) / "runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python
