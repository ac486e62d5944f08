"""grep: regex search over the repository's files; ripgrep when installed, Python otherwise."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from .base import ToolResult
from .files import glob_match, not_found_message, regular_inside, repo_files
from .paths import PRIVATE_DIR, PathError, relpath, resolve_in_root
from .textio import is_binary, read_regular

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 5_000_000


def grep(root: Path, pattern: str, path: str | None = None, glob: str | None = None,
         ignore_case: bool = False) -> ToolResult:
    """Search file contents for the regex `pattern`; lines are reported as `path:line: text`."""
    try:
        sub = resolve_in_root(root, path)
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    except re.error as exc:
        return ToolResult(False, f"invalid regular expression {pattern!r}: {exc}", {"error": "regex"})
    if not sub.exists():
        return ToolResult(False, not_found_message(root, path, kind="any"), {"error": "not_found"})
    if not (sub.is_dir() or sub.is_file()):  # a FIFO or device: reading it could block forever
        return ToolResult(False, f"{path} is not a regular file or directory; not searched.",
                          {"error": "not_regular"})
    root = Path(root).resolve()
    if shutil.which("rg"):
        found = _ripgrep(root, sub, pattern, glob, ignore_case)
        engine = "ripgrep"
    else:
        found = None
    if found is None:
        found = _python_grep(root, sub, regex, glob)
        engine = "python"
    matches, total, nfiles = found
    if not matches:
        return ToolResult(True, f"No matches for {pattern!r}.", {"matches": 0, "files": 0,
                                                                "engine": engine})
    lines = [f"{p}:{n}: {_clip(t)}" for p, n, t in matches[:MAX_MATCHES]]
    text = "\n".join(lines)
    summary = (f"[{total} match{'es' if total != 1 else ''} in {nfiles} "
               f"file{'s' if nfiles != 1 else ''}")
    summary += f"; showing the first {MAX_MATCHES}. Narrow with `path` or `glob`.]" \
        if total > MAX_MATCHES else "]"
    return ToolResult(True, text + "\n" + summary,
                      {"matches": total, "files": nfiles, "truncated": total > MAX_MATCHES,
                       "engine": engine})


def _clip(text: str) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " [...]"


def _python_grep(root: Path, sub: Path, regex: re.Pattern, glob: str | None):
    targets = [relpath(root, sub)] if sub.is_file() else repo_files(root, sub)
    base = str(root)
    matches, total, nfiles = [], 0, 0
    for rel in targets:
        if glob and not glob_match(rel, glob):
            continue
        full = root / rel
        if not regular_inside(base, str(full)):  # symlinks out of the root, FIFOs, devices
            continue
        try:
            if full.stat().st_size > MAX_FILE_BYTES:
                continue
            data = read_regular(full)
        except OSError:
            continue
        if is_binary(data):
            continue
        text = data.decode("utf-8", "replace")
        if not regex.search(text):
            continue
        hit = False
        for n, line in enumerate(text.split("\n"), 1):
            if regex.search(line):
                total += 1
                hit = True
                if len(matches) < MAX_MATCHES:
                    matches.append((rel, n, line))
        nfiles += hit
    return matches, total, nfiles


def _ripgrep(root: Path, sub: Path, pattern: str, glob: str | None, ignore_case: bool):
    cmd = ["rg", "--json", "--no-config", "-g", f"!{PRIVATE_DIR}/", "-e", pattern]
    if ignore_case:
        cmd.append("-i")
    if glob:
        cmd += ["-g", glob]
    cmd.append(str(sub.relative_to(root)) if sub != root else ".")
    try:
        res = subprocess.run(cmd, cwd=root, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode not in (0, 1):
        return None  # e.g. a regex rg cannot compile: let the Python fallback decide
    matches, total, files = [], 0, set()
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        ev = json.loads(line)
        if ev.get("type") != "match":
            continue
        data = ev["data"]
        rel = data["path"].get("text", "")
        rel = rel[2:] if rel.startswith("./") else rel
        total += 1
        files.add(rel)
        if len(matches) < MAX_MATCHES:
            matches.append((rel, data["line_number"], data["lines"].get("text", "").rstrip("\r\n")))
    matches.sort(key=lambda m: (m[0], m[1]))
    return matches, total, len(files)
