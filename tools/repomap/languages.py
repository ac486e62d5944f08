"""Which tree-sitter grammars are available. Python is required; any other language is used
only when its grammar wheel is importable (nothing is ever downloaded)."""
from __future__ import annotations

import importlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

# extension -> (grammar module, function returning the language pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    ".py": ("tree_sitter_python", "language"),
    ".pyi": ("tree_sitter_python", "language"),
    ".js": ("tree_sitter_javascript", "language"),
    ".jsx": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
    ".rs": ("tree_sitter_rust", "language"),
    ".java": ("tree_sitter_java", "language"),
    ".c": ("tree_sitter_c", "language"),
    ".h": ("tree_sitter_c", "language"),
    ".cc": ("tree_sitter_cpp", "language"),
    ".cpp": ("tree_sitter_cpp", "language"),
    ".hpp": ("tree_sitter_cpp", "language"),
    ".rb": ("tree_sitter_ruby", "language"),
}


@lru_cache(maxsize=None)
def available(module: str) -> bool:
    """Whether a grammar wheel is installed (checked without importing it)."""
    return importlib.util.find_spec(module) is not None


def grammar_for(path: str) -> tuple[str, str] | None:
    """(module, function) of the grammar for a file name, if that grammar is installed."""
    spec = GRAMMARS.get(os.path.splitext(path)[1].lower())
    return spec if spec and available(spec[0]) else None


@lru_cache(maxsize=None)
def load_language(module: str, func: str):
    """The tree_sitter.Language for a grammar module."""
    from tree_sitter import Language
    return Language(getattr(importlib.import_module(module), func)())


@lru_cache(maxsize=None)
def tags_query_source(module: str) -> str | None:
    """The `queries/tags.scm` a grammar wheel ships (definitions and references), if any."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = Path(loc) / "queries" / "tags.scm"
        if candidate.is_file():
            return candidate.read_text()
    return None
