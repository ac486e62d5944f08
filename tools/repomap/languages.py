"""Which tree-sitter grammars are available. Python, JavaScript, TypeScript, Go, Rust, Java, C,
C++ and Ruby grammars are dependencies (per-language wheels from PyPI, a few hundred KB each);
a language is used only when its wheel is importable, and nothing is ever downloaded. Source
files in a language with no grammar here (or whose wheel is missing) are listed by name only."""
from __future__ import annotations

import importlib
import importlib.util
import os
from functools import lru_cache

# extension -> (grammar module, function returning the language pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    ".py": ("tree_sitter_python", "language"),
    ".pyi": ("tree_sitter_python", "language"),
    ".js": ("tree_sitter_javascript", "language"),
    ".jsx": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"),
    ".cjs": ("tree_sitter_javascript", "language"),
    ".mts": ("tree_sitter_typescript", "language_typescript"),
    ".cts": ("tree_sitter_typescript", "language_typescript"),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
    ".rs": ("tree_sitter_rust", "language"),
    ".java": ("tree_sitter_java", "language"),
    ".c": ("tree_sitter_c", "language"),
    ".h": ("tree_sitter_c", "language"),
    ".cc": ("tree_sitter_cpp", "language"),
    ".cpp": ("tree_sitter_cpp", "language"),
    ".cxx": ("tree_sitter_cpp", "language"),
    ".hpp": ("tree_sitter_cpp", "language"),
    ".hh": ("tree_sitter_cpp", "language"),
    ".hxx": ("tree_sitter_cpp", "language"),
    ".rb": ("tree_sitter_ruby", "language"),
}


# source files the map names without parsing them (no grammar for their language here)
OTHER_SOURCE = {".kt", ".kts", ".swift", ".scala", ".cs", ".php", ".lua", ".ex", ".exs", ".erl",
                ".hs", ".ml", ".clj", ".dart", ".zig", ".nim", ".jl", ".r", ".pl", ".m", ".mm",
                ".fs", ".groovy", ".vue", ".svelte", ".sol", ".v", ".sv", ".vhd"}


@lru_cache(maxsize=None)
def available(module: str) -> bool:
    """Whether a grammar wheel is installed (checked without importing it)."""
    return importlib.util.find_spec(module) is not None


def grammar_for(path: str) -> tuple[str, str] | None:
    """(module, function) of the grammar for a file name, if that grammar is installed."""
    spec = GRAMMARS.get(os.path.splitext(path)[1].lower())
    return spec if spec and available(spec[0]) else None


def unparsed_source(path: str) -> bool:
    """A source file the map can only name: a known language without an installed grammar."""
    ext = os.path.splitext(path)[1].lower()
    return ext in OTHER_SOURCE or (ext in GRAMMARS and not available(GRAMMARS[ext][0]))


@lru_cache(maxsize=None)
def load_language(module: str, func: str):
    """The tree_sitter.Language for a grammar module."""
    from tree_sitter import Language
    return Language(getattr(importlib.import_module(module), func)())
