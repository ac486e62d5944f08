"""list_files: the repository's files (git's view, .gitignore honoured), filtered by a glob."""
from __future__ import annotations

from pathlib import Path

from .base import ToolResult
from .files import GlobError, glob_match, glob_regex, not_found_message, repo_files
from .paths import PathError, relpath, resolve_in_root

MAX_FILES = 500


def list_files(root: Path, path: str | None = None, pattern: str | None = None) -> ToolResult:
    """List files under `path` (default: everything) whose path matches `pattern`."""
    try:
        sub = resolve_in_root(root, path)
        if pattern:
            glob_regex(pattern.strip())
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    except GlobError as exc:
        return ToolResult(False, str(exc), {"error": "glob"})
    if not sub.exists():
        return ToolResult(False, not_found_message(root, path, kind="dir"), {"error": "not_found"})
    if sub.is_file():
        return ToolResult(True, relpath(root, sub), {"count": 1, "files": [relpath(root, sub)]})
    files = repo_files(root, sub)
    if pattern:
        files = [f for f in files if glob_match(f, pattern)]
    shown = files[:MAX_FILES]
    text = "\n".join(shown)
    if not files:
        text = "(no files match)" if pattern else "(no files)"
    elif len(files) > len(shown):
        text += (f"\n[{len(files)} files; showing the first {len(shown)}. Narrow with `path` "
                 "or `pattern`.]")
    return ToolResult(True, text, {"count": len(files), "files": shown,
                                   "truncated": len(files) > len(shown)})
