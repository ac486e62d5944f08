"""DESIGN.md section 2: the headless core imports no textual/rich, and imports point one way
(tui -> agent -> tools, agent -> engine -> kernels)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UI_IMPORT = re.compile(r"^\s*(from|import)\s+(textual|rich)\b", re.M)


def _sources(*folders: str):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path, package: str) -> bool:
    return re.search(rf"^\s*(from|import)\s+{re.escape(package)}\b", path.read_text(), re.M) is not None


def test_headless_core_has_no_ui_imports():
    offenders = [str(p.relative_to(ROOT)) for p in
                 _sources("engine", "kernels", "tools", "clover_cli/agent", "clover_cli/modes")
                 if UI_IMPORT.search(p.read_text())]
    assert offenders == []


def test_dependency_direction():
    """engine/training is exempt from the engine's rule: the trainer's data generator runs the
    real tools and renders the agent's prompt (issue 5); the decoding engine never does."""
    wrong = []
    for p in _sources("engine", "kernels"):
        if "training" in p.relative_to(ROOT).parts:
            continue
        for pkg in ("clover_cli.agent", "clover_cli.tools", "clover_cli.tui", "clover_cli.modes"):
            if _imports(p, pkg):
                wrong.append(f"{p.relative_to(ROOT)} imports {pkg}")
    for p in _sources("kernels"):
        if _imports(p, "clover_cli.engine"):
            wrong.append(f"{p.relative_to(ROOT)} imports clover_cli.engine")
    for p in _sources("tools", "clover_cli/agent"):
        if _imports(p, "clover_cli.tui"):
            wrong.append(f"{p.relative_to(ROOT)} imports clover_cli.tui")
    assert wrong == []


def test_importing_the_core_loads_no_ui_library():
    code = ("import sys\n"
            "import clover_cli.agent, clover_cli.agent.backends, clover_cli.engine.decode, "
            "clover_cli.tools.registry, clover_cli.modes.fix, clover_cli.modes.swebench\n"
            "print([m for m in ('textual', 'rich') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
