"""repo_map: the repository's most referenced definitions, ranked toward the files in focus
and fitted to a token budget. Tags are cached by file mtime under `.clover/repomap/`."""
from __future__ import annotations

import hashlib
import pickle
import time
from pathlib import Path

from ..base import ToolResult
from ..files import repo_files
from ..paths import PathError, relpath, resolve_in_root
from ..textio import atomic_write
from .cache import CACHE_VERSION, TagCache
from .languages import grammar_for
from .render import estimate_tokens, fit

DEFAULT_BUDGET = 1024
FOCUS_WEIGHT = 100.0
FOCUS_IDENT_BOOST = 10.0
MAX_FILES = 20_000


def _signature(stats: dict[str, tuple[int, int]]) -> str:
    h = hashlib.sha1(f"v{CACHE_VERSION}".encode())
    for rel in sorted(stats):
        m, s = stats[rel]
        h.update(f"{rel}\0{m}\0{s}\n".encode())
    return h.hexdigest()


def _build_index(tags: dict) -> dict:
    """Files, graph and flat definition table built from every file's tags."""
    from .rank import build_graph
    files = sorted(tags)
    graph, vocab = build_graph([{d.name for d in tags[f].defs} for f in files],
                               [tags[f].ref_list for f in files])
    ident_of = {name: i for i, name in enumerate(vocab)}
    defs = []  # (file index, ident index, line, text, parent_line, parent_text)
    for fi, rel in enumerate(files):
        lines = {d.line: d.text for d in tags[rel].defs}
        for d in tags[rel].defs:
            defs.append((fi, ident_of[d.name], d.line, d.text, d.parent_line,
                         lines.get(d.parent_line, "")))
    return {"files": files, "graph": graph, "defs": defs}


class IndexCache:
    """The built graph for one exact set of (file, mtime, size): a warm map skips all parsing."""

    def __init__(self, root: Path):
        self.path = Path(root) / ".clover" / "repomap" / "index.pickle"

    def load(self, signature: str) -> dict | None:
        """The index if it was built for exactly this signature (read first, so a stale index
        costs a few bytes of reading, not the whole file)."""
        try:
            with open(self.path, "rb") as fh:
                if pickle.load(fh) != signature:
                    return None
                return pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError):
            return None

    def save(self, signature: str, index: dict) -> None:
        data = (pickle.dumps(signature, protocol=pickle.HIGHEST_PROTOCOL)
                + pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
        atomic_write(self.path, data, 0o644)


class ResultCache:
    """The last few rendered maps, keyed by repository state, focus and budget."""

    KEEP = 16

    def __init__(self, root: Path):
        self.path = Path(root) / ".clover" / "repomap" / "results.pickle"

    def _all(self) -> dict:
        try:
            with open(self.path, "rb") as fh:
                blob = pickle.load(fh)
            return blob if isinstance(blob, dict) else {}
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError):
            return {}

    def get(self, key: str) -> tuple[str, dict] | None:
        return self._all().get(key)

    def put(self, key: str, value: tuple[str, dict]) -> None:
        blob = self._all()
        blob.pop(key, None)
        blob[key] = value
        while len(blob) > self.KEEP:
            blob.pop(next(iter(blob)))
        atomic_write(self.path, pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL), 0o644)


def _focus(root: Path, paths: list[str] | None) -> list[str]:
    out = []
    for p in paths or []:
        rel = relpath(root, resolve_in_root(root, p))
        out.append("" if rel == "." else rel)
    return out


def repo_map(root: Path, paths: list[str] | None = None, budget_tokens: int | None = None) -> ToolResult:
    """Map of the most important definitions, personalised toward `paths`."""
    started = time.perf_counter()
    root = Path(root).resolve()
    budget = int(budget_tokens or DEFAULT_BUDGET)
    if budget < 16:
        return ToolResult(False, "budget_tokens must be at least 16", {"error": "bad_arguments"})
    try:
        focus = _focus(root, paths)
    except PathError as exc:
        return ToolResult(False, str(exc), {"error": "path"})
    rels = [r for r in repo_files(root) if grammar_for(r)]
    if not rels:
        return ToolResult(True, "No source files in a language with an installed grammar.",
                          {"files": 0})
    skipped = max(0, len(rels) - MAX_FILES)
    if skipped:  # keep the focus files, then the rest in path order
        def in_focus(r: str) -> bool:
            return any(r == p or r.startswith(p.rstrip("/") + "/") for p in focus if p)
        rels = sorted(rels, key=lambda r: not in_focus(r))[:MAX_FILES]
    tag_cache = TagCache(root)
    stats = tag_cache.stats(rels)
    sig = _signature(stats)
    key = f"{sig}|{sorted(focus)}|{budget}"
    results = ResultCache(root)
    hit = results.get(key)
    if hit is not None:
        text, details = hit
        return ToolResult(True, text, {**details, "parsed": 0, "cached": True,
                                       "seconds": round(time.perf_counter() - started, 3)})
    import numpy as np
    from .rank import pagerank
    index_cache = IndexCache(root)
    index = index_cache.load(sig)
    parsed = 0
    if index is None:
        tags, parsed = tag_cache.update(stats)
        index = _build_index(tags)
        index_cache.save(sig, index)
    files: list[str] = index["files"]
    g = index["graph"]
    defs = index["defs"]
    if not defs:
        return ToolResult(True, "No definitions found.", {"files": len(files), "parsed": parsed})
    focus_files = [f for f in files if any(f == p or p == "" or f.startswith(p.rstrip("/") + "/")
                                           for p in focus)]
    person = np.ones(len(files))
    if focus_files:  # teleport (almost) only to the files in focus
        pos = {f: i for i, f in enumerate(files)}
        person *= 1.0 / FOCUS_WEIGHT
        for f in focus_files:
            person[pos[f]] = len(files) / len(focus_files)
    file_rank, flow = pagerank(g, person)
    d_file = np.fromiter((d[0] for d in defs), np.int64, len(defs))
    d_ident = np.fromiter((d[1] for d in defs), np.int64, len(defs))
    score = flow[d_ident] / g.ndefs[d_ident]  # [D] rank of each definition
    if focus_files:  # names the focus files use directly come first (Aider's mentioned idents)
        direct = np.zeros(g.n_idents)
        direct[g.ref_ident[np.isin(g.ref_file, [pos[f] for f in focus_files])]] = 1.0
        score = score * (1.0 + (FOCUS_IDENT_BOOST - 1.0) * direct[d_ident])
    order = np.lexsort((-file_rank[d_file], -score))
    file_order = {files[i]: float(r) for i, r in enumerate(file_rank)}
    items = [(files[defs[k][0]], defs[k][2], defs[k][3], defs[k][4], defs[k][5])
             for k in order[: budget // 3 + 10]]
    where = f"; ranked toward {', '.join(p or '.' for p in focus)}" if focus else ""
    more = f" (the repository has {skipped} more source files; not mapped)" if skipped else ""
    header = (f"Repository map: {{shown}} definitions from {{nfiles}} of {len(files)} files"
              f"{more}{where}. Line numbers are for read_file.\n")
    text, shown = fit(items, file_order, budget - estimate_tokens(header) - 2)
    header = header.format(shown=shown, nfiles=len({it[0] for it in items[:shown]}))
    details = {"files": len(files), "definitions": shown, "tokens": estimate_tokens(header + text),
               "top_files": sorted(file_order, key=lambda f: -file_order[f])[:10]}
    results.put(key, (header + text, details))
    elapsed = time.perf_counter() - started
    return ToolResult(True, header + text, {**details, "parsed": parsed, "cached": parsed == 0,
                                            "seconds": round(elapsed, 3)})
