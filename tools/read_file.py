"""read_file: numbered lines of a text file, capped, with a note on how to read further."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Iterator

from .argcheck import path_error
from .base import ToolResult
from .files import not_found_message
from .paths import PathError, relpath, resolve_in_root
from .textio import NotRegularFileError, body, decode, is_binary, read_regular, split_lines

MAX_LINES = 2000
MAX_CHARS = 60_000
MAX_LINE_CHARS = 2000
COUNT_LIMIT_BYTES = 50_000_000  # beyond this, the total line count is not computed


def read_file(root: Path, path: str, start_line: int | None = None,
              end_line: int | None = None) -> ToolResult:
    """Return lines `start_line..end_line` (1-based, inclusive) numbered like `cat -n`.

    Text is decoded the way edit_file matches it (utf-8, else latin-1), so what the model
    reads is what it can quote back in an edit.
    """
    err = path_error(path)  # a megabyte path is refused at once (docs/tools.md, "Argument limits")
    if err:
        return ToolResult(False, err, {"error": "path"})
    try:
        full = resolve_in_root(root, path)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    if full.is_dir():
        return ToolResult(False, f"{path} is a directory; use list_files to see its files.",
                          {"error": "is_directory"})
    if not full.exists():
        return ToolResult(False, not_found_message(root, path), {"error": "not_found"})
    if not full.is_file():
        return ToolResult(False, f"{path} is not a regular file (a FIFO, socket or device); "
                          "not read.", {"error": "not_regular"})
    start = max(1, int(start_line or 1))
    if end_line is not None and int(end_line) < start:
        return ToolResult(False, f"end_line ({end_line}) is before start_line ({start}).",
                          {"error": "bad_range"})
    size = full.stat().st_size
    with ExitStack() as stack:
        try:
            lines, encoding = _open_lines(full, size, stack)
        except NotRegularFileError:
            return ToolResult(False, f"{path} is not a regular file; not read.",
                              {"error": "not_regular"})
        if lines is None:
            return ToolResult(False, f"{path} is a binary file ({size} bytes); not shown.",
                              {"error": "binary", "size": size})
        out, chars, lineno, last_shown, truncated_by = [], 0, 0, 0, None
        for line in lines:
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
            text = body(line)
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
        # nothing shown: the loop read the whole file, so lineno is its line count
        if start > 1 and (lineno or 0) < start:
            return ToolResult(False, f"{rel} has only {lineno or 0} lines; start_line {start} is "
                              "past the end.", {"error": "bad_range", "total_lines": lineno})
        return ToolResult(True, f"({rel} is empty)", {"path": rel, "total_lines": 0})
    text = "\n".join(out)
    if truncated_by:
        of = f" of {total}" if total else ""
        text += (f"\n[showing lines {start}-{last_shown}{of}; output capped. Call read_file with "
                 f"start_line={last_shown + 1} to read further.]")
    return ToolResult(True, text, {"path": rel, "start_line": start, "end_line": last_shown,
                                   "total_lines": total, "truncated": bool(truncated_by),
                                   "encoding": encoding})


def _open_lines(full: Path, size: int, stack: ExitStack) -> tuple[Iterator[str] | None, str]:
    """(lines with their terminators, encoding); lines None for a binary file. Files up to
    COUNT_LIMIT_BYTES are decoded whole like edit_file does; bigger ones stream as utf-8."""
    if size <= COUNT_LIMIT_BYTES:
        data = read_regular(full)
        if is_binary(data):
            return None, ""
        text, encoding = decode(data)
        return iter(split_lines(text)), encoding
    fh = stack.enter_context(open(full, "rb"))
    if is_binary(fh.read(8192)):
        return None, ""
    fh.seek(0)
    return (raw.decode("utf-8", "replace") for raw in fh), "utf-8"
