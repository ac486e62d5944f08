"""Every data file the code needs at run time ships in the package (a normal, non-editable
install must find the bundled model, prompts, chat templates and TUI styles)."""
from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"clover_cli": "clover_cli", "engine": "clover_cli.engine", "kernels": "clover_cli.kernels",
           "tools": "clover_cli.tools", "prompts": "clover_cli.prompts"}


def _package_of(path: Path) -> tuple[str, Path] | None:
    """The nearest enclosing package (dotted name) and its folder, or None."""
    folder = path.parent
    while folder != ROOT:
        if (folder / "__init__.py").exists():
            rel = folder.relative_to(ROOT).parts
            return ".".join([FOLDERS[rel[0]], *rel[1:]]), folder
        folder = folder.parent
    return None


def _glob(inner: str, pattern: str) -> bool:
    """setuptools glob semantics: `*` stays inside one folder."""
    parts, pats = inner.split("/"), pattern.split("/")
    return len(parts) == len(pats) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, pats))


def test_tracked_data_files_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    tracked = subprocess.run(["git", "ls-files", *FOLDERS], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = []
    for rel in tracked:
        path = ROOT / rel
        if path.suffix == ".py" or not path.exists():
            continue
        found = _package_of(path)
        assert found, f"{rel} is not inside a package"
        package, folder = found
        inner = path.relative_to(folder).as_posix()
        patterns = data.get("*", []) + data.get(package, [])
        if not any(_glob(inner, p) for p in patterns):
            missing.append(rel)
    assert not missing, f"not shipped by package-data: {missing}"


def test_bundled_model_is_covered():
    bundled = ROOT / "engine" / "bundled" / "tiny"
    assert (bundled / "config.json").exists() and any(bundled.glob("*.safetensors"))


def test_license_is_an_spdx_string():
    """A TOML table here made every install print setuptools deprecation warnings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"


def test_build_py_warns_nothing_and_ships_the_bundled_model(tmp_path):
    """`setup.py build_py` is the step of `pip install .` that lays out the packages (offline, with
    this environment's setuptools); it warned that clover_cli.engine.bundled.tiny is absent from
    `packages`."""
    import sys

    out = tmp_path / "lib"
    p = subprocess.run([sys.executable, "-W", "always", "setup.py", "-q", "build_py", "--build-lib", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    assert "absent from" not in text and "deprecated" not in text.lower(), text
    tiny = out / "clover_cli" / "engine" / "bundled" / "tiny"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= \
        {f.name for f in tiny.iterdir()}
