"""grep: regex search over the repository's files; ripgrep when installed, Python otherwise.

Both engines answer alike (docs/tools.md, "grep"): neither can hang (ripgrep's regex engine does
not backtrack and runs under a deadline; the Python engine, grepsearch, runs the `regex` module in
a worker process killed at the deadline, tools/grepworker.py), lines are decoded the way read_file shows them (a line that is not utf-8 is latin-1),
file names are shown escaped when they hold unprintable characters, and files too big to search
are named. A pattern that can match non-ASCII text goes to the Python engine, which decodes each
file as a whole like read_file; ripgrep matches bytes and would miss `café` in a latin-1 file.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import regex

from .argcheck import glob_error, path_error, pattern_error
from .base import ToolResult
from .display import show_path
from .files import GlobError, not_found_message, regular_inside, repo_files
from .gitignore import unsafe_ignore_file
from .globmatch import check_glob, glob_match
from .grepsearch import MAX_FILE_BYTES, MAX_MATCHES, Deadline, Found, compile_pattern, search_files
from .paths import PRIVATE_DIR, PathError, relpath, resolve_in_root
from .textio import decode, is_binary, read_regular

MAX_LINE_CHARS = 300
_RG_UNSAFE = re.compile(r"\\[xuUNpP]")  # escapes that name non-ASCII characters
_NESTED = re.compile(r"[*+}]\)*[*+{]|\)[*+{]")  # a repeat inside a repeat: a pattern worth blaming


def grep(root: Path, pattern: str, path: str | None = None, glob: str | None = None,
         ignore_case: bool = False) -> ToolResult:
    """Search file contents for the regex `pattern`; lines are reported as `path:line: text`."""
    for err, kind in ((pattern_error(pattern), "regex"), (path_error(path), "path"),
                      (glob_error(glob), "glob")):
        if err:
            return ToolResult(False, err, {"error": kind})
    try:
        sub = resolve_in_root(root, path)
        rx = compile_pattern(pattern, ignore_case)
        if glob:
            check_glob(glob)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    except GlobError as exc:
        return ToolResult(False, str(exc), {"error": "glob"})
    except (regex.error, re.error, ValueError, OverflowError, RecursionError) as exc:
        return ToolResult(False, f"invalid regular expression {_short(pattern)}: {exc}", {"error": "regex"})
    if not sub.exists():
        return ToolResult(False, not_found_message(root, path, kind="any"), {"error": "not_found"})
    if not (sub.is_dir() or sub.is_file()):  # a FIFO or device: reading it could block forever
        return ToolResult(False, f"{path} is not a regular file or directory; not searched.",
                          {"error": "not_regular"})
    root = Path(root).resolve()
    deadline = Deadline()
    found = None
    engine = "python"
    # which files a search reads; an ignore file ripgrep would read without end (a symlink to
    # /dev/zero) or that is huge keeps ripgrep out of it (tools/gitignore.py)
    file_set = "ripgrep" if shutil.which("rg") and unsafe_ignore_file(root, sub) is None else "python"
    if file_set == "ripgrep" and rg_can_search(pattern):
        found = _ripgrep(root, sub, pattern, glob, ignore_case, deadline)
        engine = "ripgrep" if found is not None else "python"
    if found is None:  # the Python engine reads ripgrep's file set where ripgrep is installed
        found = search_files(root, _searched_files(root, sub, glob, file_set), rx, deadline)
    if found.timed_out:
        blame = (" A pattern with nested repeats such as (a|aa)+b can take exponential time; simplify it,"
                 " or narrow" if _NESTED.search(pattern) else " Narrow")
        so_far = (f" ({found.total} match{'es' if found.total != 1 else ''} in {found.nfiles} "
                  f"file{'s' if found.nfiles != 1 else ''} before it stopped)" if found.total else "")
        return ToolResult(False, f"grep stopped: searching for {_short(pattern)} took longer than "
                          f"{deadline.seconds:g} s{so_far}.{blame} the search with `path` or "
                          "`glob`.", {"error": "timeout", "engine": engine,
                                      "matches": found.total, "files": found.nfiles})
    skipped = _skipped_note(found)
    details = {"matches": found.total, "files": found.nfiles, "engine": engine,
               "skipped": [rel for rel, _ in found.skipped]}
    if not found.matches:
        hint, suggestions = _no_match_hint(root, sub, pattern, glob, ignore_case, file_set)
        return ToolResult(True, f"No matches for {_short(pattern)}.{hint}{skipped}",
                          {**details, "suggestions": suggestions})
    lines = [f"{show_path(p)}:{n}: {_clip(t)}" for p, n, t in found.matches[:MAX_MATCHES]]
    total, nfiles = found.total, found.nfiles
    summary = (f"[{total} match{'es' if total != 1 else ''} in {nfiles} "
               f"file{'s' if nfiles != 1 else ''}")
    summary += f"; showing the first {MAX_MATCHES}. Narrow with `path` or `glob`.]" \
        if total > MAX_MATCHES else "]"
    return ToolResult(True, "\n".join(lines) + "\n" + summary + skipped,
                      {**details, "truncated": total > MAX_MATCHES})


def rg_can_search(pattern: str) -> bool:
    """Whether ripgrep answers like the Python engine: it matches bytes, so a pattern that can
    match a non-ASCII character would miss it in a latin-1 file that read_file shows decoded."""
    return pattern.isascii() and not _RG_UNSAFE.search(pattern)


def _skipped_note(found: Found) -> str:
    if not found.skipped:
        return ""
    names = ", ".join(f"{show_path(rel)} ({why})" for rel, why in found.skipped[:10])
    more = f" and {len(found.skipped) - 10} more" if len(found.skipped) > 10 else ""
    return f"\n[not searched: {names}{more}]"


def _short(pattern: str) -> str:
    text = repr(pattern)
    return text if len(text) <= 200 else text[:200] + "..."


# A search for a name that is not there is most often a mistyped or misremembered name (the bundled
# model writes `onon_validate_error` for `on_validate_error`; a person types `restock_shelve`).
# Like a compiler's "did you mean", the empty result names up to three close identifiers of the
# searched files, with where each is defined (or first used), so the next call can be the right one.
_NAME_PATTERN = re.compile(r"^(?P<definition>\(def\|class\)\s*|(?:def|class)\s+)?(?:\\b)?"
                           r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\\b)?$")
_IDENT = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]{2,}")
_DEF_LINE = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
SUGGEST_MAX_NAMES = 3
SUGGEST_SCAN_BYTES = 20_000_000  # identifiers are collected from at most this much text


def _no_match_hint(root: Path, sub: Path, pattern: str, glob: str | None,
                   ignore_case: bool = False, engine: str = "python") -> tuple[str, list]:
    """(" Did you mean ...?" or "", suggestions) for a pattern that is one identifier, optionally
    behind `def `, `class ` or `(def|class) ` (the agent's definition search). Names are taken
    from the files the search itself read (ripgrep's file set when ripgrep searched), so every
    suggestion is one the next grep finds."""
    m = _NAME_PATTERN.match(pattern.strip())
    if not m:
        return "", []
    name, definition = m.group("name"), bool(m.group("definition"))
    fold = str.lower if ignore_case else (lambda x: x)
    first: dict[str, tuple[str, int]] = {}   # identifier -> (file, offset) of its first use
    defined: dict[str, tuple[str, int]] = {}  # identifier -> (file, offset) of its def/class
    scanned = 0
    base = str(root)
    for rel in _searched_files(root, sub, glob, engine):
        if scanned > SUGGEST_SCAN_BYTES:
            break
        text = _text_of(base, root / rel)
        if text is None:
            continue
        scanned += len(text)
        for d in _DEF_LINE.finditer(text):
            defined.setdefault(d.group(1), (rel, d.start(1)))
        for i in _IDENT.finditer(text):
            first.setdefault(i.group(), (rel, i.start()))
    same = [n for n in (defined if definition else first) if fold(n) == fold(name)]
    if definition and same:
        # defined after all, in a form the pattern missed (`def  name`, `async def name`)
        close = same[:SUGGEST_MAX_NAMES]
    elif definition and any(fold(n) == fold(name) for n in first):
        # the name is there, just not as a def/class line (a variable, an import, an attribute)
        there = next(n for n in first if fold(n) == fold(name))
        rel, line = _line_of(root, first[there])
        return (f" {there} occurs in the code but no def or class line defines it; first at "
                f"{rel}:{line}. Search for the name alone to see every use.",
                [{"name": there, "path": rel, "line": line, "defined": False}])
    else:
        import difflib

        pool = list(defined) if definition and defined else list(first)
        # difflib's ratio 2*M/(len(a)+len(b)) >= 0.8 needs lengths within 2/3..3/2 of each
        # other: dropping the rest first changes no answer and keeps a big tree's search quick
        pool = [p for p in pool if 2 * len(name) <= 3 * len(p) and 2 * len(p) <= 3 * len(name)]
        by_key: dict[str, list[str]] = {}
        for ident in pool:
            by_key.setdefault(ident.lower(), []).append(ident)
        # the same name in another case first (a case-sensitive search missed it), then close
        # names, compared without case
        close = [n for n in by_key.get(name.lower(), []) if n != name]
        for key in difflib.get_close_matches(name.lower(), list(by_key), n=SUGGEST_MAX_NAMES,
                                             cutoff=0.8):
            close += [n for n in by_key[key] if n not in close and fold(n) != fold(name)]
        close = close[:SUGGEST_MAX_NAMES]
    if not close:
        return "", []
    suggestions, parts = [], []
    for ident in close:
        where = defined.get(ident)
        rel, line = _line_of(root, where or first[ident])
        suggestions.append({"name": ident, "path": rel, "line": line, "defined": bool(where)})
        parts.append(f"{ident} ({'defined' if where else 'first used'} at {rel}:{line})")
    return " Did you mean " + " or ".join(parts) + "?", suggestions


def _searched_files(root: Path, sub: Path, glob: str | None, engine: str) -> list[str]:
    """The repository-relative files the search read: ripgrep's own file set (it skips hidden
    files and reads brace globs) when ripgrep searched, else the `list_files` set."""
    if sub.is_file():  # ripgrep reads a named file whatever the glob; the Python scan does not
        rel = relpath(root, sub)
        return [rel] if engine == "ripgrep" or not glob or glob_match(rel, glob) else []
    if engine == "ripgrep":
        try:
            res = subprocess.run(["rg", "--files", "--null", *_rg_scope(root, sub, glob)], cwd=root,
                                 capture_output=True, stdin=subprocess.DEVNULL, timeout=Deadline().seconds)
        except (OSError, subprocess.TimeoutExpired):
            res = None
        if res is not None and res.returncode in (0, 1):
            names = [n for n in res.stdout.decode("utf-8", "replace").split("\0") if n]
            return sorted(n[2:] if n.startswith("./") else n for n in names)
    return [rel for rel in repo_files(root, sub) if not glob or glob_match(rel, glob)]


def _text_of(base: str, full: Path) -> str | None:
    """A searchable file's text as read_file shows it, or None (outside the root, not regular,
    too big for suggestions, binary)."""
    if not regular_inside(base, str(full)):  # symlinks out of the root, FIFOs, devices
        return None
    try:
        if full.stat().st_size > MAX_FILE_BYTES:
            return None
        data = read_regular(full)
    except OSError:
        return None
    return None if is_binary(data) else decode(data)[0]


def _line_of(root: Path, where: tuple[str, int]) -> tuple[str, int]:
    rel, offset = where
    text = _text_of(str(root), root / rel) or ""
    return rel, text.count("\n", 0, offset) + 1


def _clip(text: str) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " [...]"


def _python_grep(root: Path, sub: Path, rx: "regex.Pattern", glob: str | None,
                 deadline: Deadline | None = None) -> Found:
    targets = [relpath(root, sub)] if sub.is_file() else repo_files(root, sub)
    if glob:
        targets = [rel for rel in targets if glob_match(rel, glob)]
    return search_files(root, targets, rx, deadline or Deadline())


def _rg_scope(root: Path, sub: Path, glob: str | None) -> list[str]:
    """ripgrep options naming what it reads: no user config, never `.clover/`, the glob, the path
    (the search and the suggestions' file list must read the same files)."""
    scope = ["--no-config", "-g", f"!{PRIVATE_DIR}/"] + (["-g", glob] if glob else [])
    return scope + [str(sub.relative_to(root)) if sub != root else "."]


def _rg_text(field: dict, encoding: str = "utf-8") -> str:
    """A ripgrep JSON text field: {"text": ...}, or {"bytes": base64} when it is not utf-8 (a line
    that is not utf-8 means the file is not, and read_file shows such a file as latin-1)."""
    if "text" in field:
        return field["text"]
    raw = base64.b64decode(field.get("bytes", ""))
    return raw.decode(encoding, "replace")


def _ripgrep(root: Path, sub: Path, pattern: str, glob: str | None, ignore_case: bool,
             deadline: Deadline | None = None) -> Found | None:
    """ripgrep's answer, or None when it cannot give one (the Python engine decides then)."""
    cmd = ["rg", "--json", "-e", pattern] + (["-i"] if ignore_case else [])
    cmd += _rg_scope(root, sub, glob)
    seconds = (deadline or Deadline()).seconds
    try:
        res = subprocess.run(cmd, cwd=root, capture_output=True, stdin=subprocess.DEVNULL, timeout=seconds)
    except subprocess.TimeoutExpired:
        return Found(timed_out=True)
    except OSError:
        return None
    if res.returncode not in (0, 1):
        return None  # e.g. a regex rg cannot compile: let the Python fallback decide
    found = Found()
    files = set()
    for line in res.stdout.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") != "match":
            continue
        data = ev["data"]
        rel = _rg_text(data["path"], "utf-8")
        rel = rel[2:] if rel.startswith("./") else rel
        found.total += 1
        files.add(rel)
        if len(found.matches) < MAX_MATCHES:
            text = _rg_text(data["lines"], "latin-1")
            found.matches.append((rel, data["line_number"], text.rstrip("\r\n")))
    found.matches.sort(key=lambda m: (m[0], m[1]))
    found.nfiles = len(files)
    return found
