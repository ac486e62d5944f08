"""The Python-source corpus: every .py file on this machine (stdlib + site-packages), with a
held-out split by file (a stable hash of the path relative to its root)."""
from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path
from typing import Iterator

SKIP_PARTS = {"__pycache__", "test", "tests", "idle_test", "site-packages", "lib2to3"}


def source_roots() -> list[Path]:
    """stdlib and this interpreter's site-packages (purelib)."""
    paths = sysconfig.get_paths()
    roots = [Path(paths["stdlib"]), Path(paths["purelib"])]
    return [r for r in dict.fromkeys(roots) if r.is_dir()]


def is_heldout(key: str, percent: int = 2) -> bool:
    """Stable split: True for about `percent`% of keys."""
    h = int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16)
    return h % 100 < percent


def python_files(roots: list[Path] | None = None, split: str = "train",
                 max_file_bytes: int = 200_000) -> Iterator[Path]:
    """Python files under the roots, sorted, filtered to one split ("train" | "eval" | "all")."""
    for root in roots or source_roots():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            if SKIP_PARTS.intersection(rel.parts[:-1]) and root.name != "site-packages":
                continue
            if "__pycache__" in rel.parts:
                continue
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size == 0 or size > max_file_bytes:
                continue
            held = is_heldout(rel.as_posix())
            if split == "all" or (split == "eval") == held:
                yield path


def read_source(path: Path) -> str | None:
    """File text, or None when it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
