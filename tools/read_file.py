"""read_file: numbered lines of a text file, capped, with a note on how to read further."""
from __future__ import annotations

from pathlib import Path

from .base import ToolResult
from .paths import PathError, relpath, resolve_in_root
from .textio import is_binary

MAX_LINES = 2000
MAX_CHARS = 60_000
MAX_LINE_CHARS = 2000
COUNT_LIMIT_BYTES = 50_000_000  # beyond this, the total line count is not computed


def read_file(root: Path, path: str, start_line: int | None = None,
              end_line: int | None = None) -> ToolResult:
    """Return lines `start_line..end_line` (1-based, inclusive) numbered like `cat -n`."""
    try:
        full = resolve_in_root(root, path)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    if full.is_dir():
        return ToolResult(False, f"{path} is a directory; use list_files to see its files.",
                          {"error": "is_directory"})
    if not full.is_file():
        return ToolResult(False, f"{path} does not exist.", {"error": "not_found"})
    start = max(1, int(start_line or 1))
    if end_line is not None and int(end_line) < start:
        return ToolResult(False, f"end_line ({end_line}) is before start_line ({start}).",
                          {"error": "bad_range"})
    size = full.stat().st_size
    with open(full, "rb") as fh:
        head = fh.read(8192)
        if is_binary(head):
            return ToolResult(False, f"{path} is a binary file ({size} bytes); not shown.",
                              {"error": "binary", "size": size})
        fh.seek(0)
        out, chars, lineno, last_shown, truncated_by = [], 0, 0, 0, None
        for raw in fh:
            lineno += 1
            if lineno < start:
                continue
            if end_line is not None and lineno > int(end_line):
                break
            if truncated_by:
                if size > COUNT_LIMIT_BYTES:
                    lineno = None
                    break
                continue
            text = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + f"... [{len(text) - MAX_LINE_CHARS} more characters]"
            entry = f"{lineno:6d}\t{text}"
            if len(out) >= MAX_LINES or chars + len(entry) > MAX_CHARS:
                truncated_by = "size"
                continue
            out.append(entry)
            chars += len(entry) + 1
            last_shown = lineno
    rel = relpath(root, full)
    total = lineno if (end_line is None and lineno is not None) else None
    if not out:
        if start > 1 and (total or 0) < start:
            return ToolResult(False, f"{rel} has only {total or 0} lines; start_line {start} is past "
                              "the end.", {"error": "bad_range", "total_lines": total})
        return ToolResult(True, f"({rel} is empty)", {"path": rel, "total_lines": 0})
    text = "\n".join(out)
    if truncated_by:
        of = f" of {total}" if total else ""
        text += (f"\n[showing lines {start}-{last_shown}{of}; output capped. Call read_file with "
                 f"start_line={last_shown + 1} to read further.]")
    return ToolResult(True, text, {"path": rel, "start_line": start, "end_line": last_shown,
                                   "total_lines": total, "truncated": bool(truncated_by)})
