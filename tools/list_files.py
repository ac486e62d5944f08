"""list_files: the repository's files (git's view, .gitignore honoured), filtered by a glob.

Globs are matched by globmatch (no backtracking); a name with unprintable characters (a newline)
is shown escaped, so it cannot pose as a second entry (docs/tools.md, "list_files")."""
from __future__ import annotations

from pathlib import Path

from .argcheck import glob_error, path_error
from .base import ToolResult
from .display import show_path
from .files import GlobError, not_found_message, repo_files
from .gitignore import heavy_ignores
from .gitutil import is_git_repo
from .globmatch import check_glob, glob_match
from .paths import PathError, relpath, resolve_in_root

MAX_FILES = 500


def list_files(root: Path, path: str | None = None, pattern: str | None = None) -> ToolResult:
    """List files under `path` (default: everything) whose path matches `pattern`."""
    for err, kind in ((path_error(path), "path"), (glob_error(pattern, "pattern"), "glob")):
        if err:
            return ToolResult(False, err, {"error": kind})
    try:
        sub = resolve_in_root(root, path)
        if pattern:
            check_glob(pattern)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    except GlobError as exc:
        return ToolResult(False, str(exc), {"error": "glob"})
    if not sub.exists():
        return ToolResult(False, not_found_message(root, path, kind="dir"), {"error": "not_found"})
    if sub.is_file():
        rel = relpath(root, sub)
        return ToolResult(True, show_path(rel), {"count": 1, "files": [rel]})
    files = repo_files(root, sub)
    heavy = heavy_ignores(root) if is_git_repo(root) else None  # git was not handed them (gitignore.py)
    if pattern:
        files = [f for f in files if glob_match(f, pattern)]
    shown = files[:MAX_FILES]
    text = "\n".join(show_path(f) for f in shown)
    if not files:
        text = "(no files match)" if pattern else "(no files)"
    elif len(files) > len(shown):
        text += (f"\n[{len(files)} files; showing the first {len(shown)}. Narrow with `path` "
                 "or `pattern`.]")
    if heavy:
        text += f"\n[ignore rules applied by a bounded matcher, some perhaps not: {heavy}]"
    return ToolResult(True, text, {"count": len(files), "files": shown,
                                   "truncated": len(files) > len(shown)})
