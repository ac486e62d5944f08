"""docs/design.md, Boundaries: which layer may import which, counting function-level imports, and
no textual/rich in the headless core. The checker walks every import statement with `ast`, so an
import hidden inside a function is caught as surely as one at the top of a module."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Source folder -> the installed package it becomes (setup.py's mapping).
FOLDERS = {"engine": "clover_cli.engine", "kernels": "clover_cli.kernels",
           "tools": "clover_cli.tools", "clover_cli": "clover_cli"}
LAYERS = ("engine", "kernels", "tools", "agent", "tui", "bench", "training")
# layer -> the layers it may import (itself included). Everything else in clover_cli
# (cli, commands, modes, config, ...) is the application layer and may import anything.
ALLOWED = {
    "engine": {"engine", "kernels"},
    "kernels": {"kernels"},
    "tools": {"tools"},
    "agent": {"agent", "engine", "tools"},
    "tui": {"tui", "agent"},
    "bench": {"bench", "engine", "agent", "tools"},  # never the trainer (the `train` extra)
    # transcripts are the agent's own prompts and real tool output, the evaluation parses calls
    # as the agent does, distillation keeps what parses as `clover bench` judges code
    "training": {"training", "engine", "agent", "tools", "bench"},
}
UI_LIBRARIES = ("textual", "rich")
HEADLESS = ("engine", "kernels", "tools", "agent", "bench", "training")


def layer_of(module: str) -> str | None:
    """'clover_cli.engine.loader' -> 'engine'; 'clover_cli.modes.fix.run' or 'clover_cli' -> 'app';
    anything outside clover_cli -> None."""
    parts = module.split(".")
    if parts[0] != "clover_cli":
        return None
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "app"


def _module_name(root: Path, path: Path) -> str | None:
    rel = path.relative_to(root)
    package = FOLDERS.get(rel.parts[0])
    if package is None:
        return None
    parts = [*package.split("."), *rel.parts[1:]]
    parts[-1] = parts[-1][:-3]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(module: str, is_package: bool, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if node.module is None or node.level:
        # `from . import x` may name submodules: count each as imported.
        return [target] + [f"{target}.{alias.name}" for alias in node.names]
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def violations(root: Path) -> list[str]:
    """Every import in the tree at `root` that breaks ALLOWED or the headless rule."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            module = _module_name(root, path)
            layer = layer_of(module) if module else None
            if layer is None or layer == "app":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for name in _imported(module, path.name == "__init__.py", node):
                    top = name.split(".")[0]
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    if top in UI_LIBRARIES and layer in HEADLESS:
                        found.append(f"{where} ({layer}) imports {name}")
                    target = layer_of(name)
                    if target is not None and target not in ALLOWED[layer]:
                        found.append(f"{where} ({layer}) imports {name} ({target})")
    return sorted(set(found))


def test_the_tree_keeps_every_boundary():
    assert violations(ROOT) == []


def _bare_tree(tmp_path: Path) -> Path:
    """The source folders with no files in them: a planted file's verdict depends only on its own
    path and text (the real tree is test_the_tree_keeps_every_boundary's), so nothing is copied."""
    tree = tmp_path / "tree"
    for folder in FOLDERS:
        (tree / folder).mkdir(parents=True)
    for layer in LAYERS:
        if (ROOT / "clover_cli" / layer).is_dir():
            (tree / "clover_cli" / layer).mkdir(exist_ok=True)
    return tree


def test_a_planted_function_level_import_is_caught(tmp_path):
    """The checker is not vacuous: an upward import hidden in a function, a relative import
    reaching out of tools, a TUI reaching into tools, and textual in the agent are each found."""
    copy = _bare_tree(tmp_path)
    plants = {
        "engine/planted.py": "def f():\n    from clover_cli.agent import parsing\n",
        "tools/planted.py": "def f():\n    from ..agent import events\n",
        "clover_cli/tui/planted.py": "from clover_cli.tools import gitutil\n",
        "clover_cli/agent/planted.py": "def f():\n    import textual\n",
        "kernels/planted.py": "import clover_cli.engine.engine\n",
        "clover_cli/training/planted.py": "from clover_cli.modes import fix\n",
        "clover_cli/bench/planted.py": "def f():\n    from clover_cli.training import trainer\n",
        "engine/planted_top.py": "import clover_cli\n",
    }
    assert violations(copy) == []
    for rel, text in plants.items():
        (copy / rel).write_text(text)
    found = "\n".join(violations(copy))
    for rel in plants:
        assert rel in found, f"{rel} not caught:\n{found}"


@pytest.mark.slow
def test_importing_the_core_loads_no_ui_library():
    """A fresh interpreter (what a third-party import drags in, too); our own import statements
    are checked in-process above."""
    code = ("import sys\n"
            "import clover_cli.agent, clover_cli.agent.backends, clover_cli.engine.engine, "
            "clover_cli.tools.registry, clover_cli.modes.fix.run, clover_cli.modes.swebench.run\n"
            "print([m for m in ('textual', 'rich') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
