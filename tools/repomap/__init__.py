"""repo_map: the repository's most referenced definitions, ranked toward the files in focus
and fitted to a token budget. Tags, the graph and recent maps are cached by file mtime in the
user's cache dir, never in the repository (store.py)."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ..base import ToolResult
from ..files import repo_files
from ..paths import PathError, relpath, resolve_in_root
from .cache import CACHE_VERSION, TagCache
from .languages import grammar_for, unparsed_source
from .render import estimate_tokens, fit
from .store import Store

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


INT_ARRAYS = ("ref_file", "ref_ident", "def_ident", "def_file", "d_file", "d_ident", "d_line",
              "d_parent")


def _build_index(tags: dict) -> tuple[dict, dict]:
    """(meta, arrays): files, graph and a columnar definition table built from every file's
    tags, in the form the cache stores (JSON-able meta, plain numeric arrays)."""
    import numpy as np
    from .rank import build_graph
    files = sorted(tags)
    graph, vocab = build_graph([{d.name for d in tags[f].defs} for f in files],
                               [tags[f].ref_list for f in files])
    ident_of = {name: i for i, name in enumerate(vocab)}
    d_file, d_ident, d_line, d_parent, texts = [], [], [], [], []
    for fi, rel in enumerate(files):
        at_line = {}
        for d in tags[rel].defs:
            at_line.setdefault(d.line, len(texts))
            d_file.append(fi)
            d_ident.append(ident_of[d.name])
            d_line.append(d.line)
            d_parent.append(d.parent_line)  # a line for now; an index below
            texts.append(d.text)
        for k in range(len(texts) - len(tags[rel].defs), len(texts)):
            d_parent[k] = at_line.get(d_parent[k], -1) if d_parent[k] else -1
    arrays = {"ref_file": graph.ref_file, "ref_ident": graph.ref_ident,
              "ref_weight": graph.ref_weight, "def_ident": graph.def_ident,
              "def_file": graph.def_file, "ndefs": graph.ndefs}
    for name, values in (("d_file", d_file), ("d_ident", d_ident), ("d_line", d_line),
                         ("d_parent", d_parent)):
        arrays[name] = np.asarray(values, dtype=np.int32)
    meta = {"files": files, "texts": texts, "n_files": graph.n_files, "n_idents": graph.n_idents}
    return meta, arrays


def _index(meta: dict, arrays: dict) -> dict | None:
    """The index the ranking uses, or None when meta/arrays are not a consistent whole (a
    damaged cache entry: every length and index range is checked before numpy indexes with it)."""
    import numpy as np
    from .rank import Graph
    try:
        files, texts = meta["files"], meta["texts"]
        n_files, n_idents = meta["n_files"], meta["n_idents"]
        if (type(n_files) is not int or type(n_idents) is not int or not isinstance(files, list)
                or len(files) != n_files or not isinstance(texts, list)
                or not all(isinstance(x, str) for x in files)
                or not all(isinstance(x, str) for x in texts)):
            return None
        a = {k: arrays[k] for k in (*INT_ARRAYS, "ref_weight", "ndefs")}
        if any(a[k].ndim != 1 or a[k].dtype.kind != "i" for k in INT_ARRAYS):
            return None
        n_defs, n_refs, n_pairs = len(texts), len(a["ref_file"]), len(a["def_ident"])
        sizes = {"ref_ident": n_refs, "ref_weight": n_refs, "def_file": n_pairs,
                 "ndefs": n_idents, "d_file": n_defs, "d_ident": n_defs, "d_line": n_defs,
                 "d_parent": n_defs}
        if any(len(a[k]) != n for k, n in sizes.items()):
            return None

        def within(x, lo, hi) -> bool:
            return len(x) == 0 or (int(x.min()) >= lo and int(x.max()) < hi)
        if not (within(a["ref_file"], 0, n_files) and within(a["def_file"], 0, n_files)
                and within(a["d_file"], 0, n_files) and within(a["ref_ident"], 0, n_idents)
                and within(a["def_ident"], 0, n_idents) and within(a["d_ident"], 0, n_idents)
                and within(a["d_parent"], -1, n_defs)):
            return None
        if a["ref_weight"].dtype.kind != "f" or a["ndefs"].dtype.kind != "f":
            return None
        if not (np.isfinite(a["ref_weight"]).all() and (a["ref_weight"] >= 0).all()
                and (a["ndefs"][a["def_ident"]] > 0).all() and (a["ndefs"][a["d_ident"]] > 0).all()):
            return None
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
    graph = Graph(n_files, n_idents, a["ref_file"], a["ref_ident"], a["ref_weight"],
                  a["def_ident"], a["def_file"], a["ndefs"])
    return {"files": files, "texts": texts, "graph": graph, **{k: a[k] for k in INT_ARRAYS}}


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
    listed = repo_files(root)
    rels = [r for r in listed if grammar_for(r)]
    others = _others_line([r for r in listed if unparsed_source(r)], budget)
    if not rels:
        if others:
            return ToolResult(True, others, {"files": 0})
        return ToolResult(True, "No source files in a language with an installed grammar.",
                          {"files": 0})
    skipped = max(0, len(rels) - MAX_FILES)
    if skipped:  # keep the focus files, then the rest in path order
        def in_focus(r: str) -> bool:
            return any(r == p or r.startswith(p.rstrip("/") + "/") for p in focus if p)
        rels = sorted(rels, key=lambda r: not in_focus(r))[:MAX_FILES]
    store = Store(root)
    try:
        return _map(root, rels, focus, budget, skipped, store, started, others)
    finally:
        store.close()


def _others_line(names: list[str], budget: int) -> str:
    """Source files in languages without a grammar, named (never an error), in at most about
    an eighth of the budget."""
    if not names:
        return ""
    head = "Not parsed (no grammar installed for their language): "
    room = max(16, budget // 8) * 4 - len(head)
    shown: list[str] = []
    for name in names:
        if sum(len(n) + 2 for n in shown) + len(name) > room:
            break
        shown.append(name)
    more = f" and {len(names) - len(shown)} more" if len(shown) < len(names) else ""
    return head + (", ".join(shown) or "") + more + "\n"


def _map(root: Path, rels: list[str], focus: list[str], budget: int, skipped: int, store: Store,
         started: float, others: str = "") -> ToolResult:
    tag_cache = TagCache(root, store)
    stats = tag_cache.stats(rels)
    sig = _signature(stats)
    key = f"{sig}|{sorted(focus)}|{budget}|{hashlib.sha1(others.encode()).hexdigest()[:12]}"
    hit = store.get_result(key)
    if hit is not None:
        text, details = hit
        return ToolResult(True, text, {**details, "parsed": 0, "cached": True,
                                       "seconds": round(time.perf_counter() - started, 3)})
    import numpy as np
    from .rank import pagerank
    loaded = store.load_graph(sig)
    index = _index(*loaded) if loaded is not None else None
    parsed = 0
    if index is None:
        tags, parsed = tag_cache.update(stats)
        meta, arrays = _build_index(tags)
        store.save_graph(sig, meta, arrays)
        index = _index(meta, arrays)
    files: list[str] = index["files"]
    g = index["graph"]
    texts: list[str] = index["texts"]
    if not texts:
        return ToolResult(True, ("No definitions found.\n" + others).strip(),
                          {"files": len(files), "parsed": parsed})
    focus_files = [f for f in files if any(f == p or p == "" or f.startswith(p.rstrip("/") + "/")
                                           for p in focus)]
    person = np.ones(len(files))
    if focus_files:  # teleport (almost) only to the files in focus
        pos = {f: i for i, f in enumerate(files)}
        person *= 1.0 / FOCUS_WEIGHT
        for f in focus_files:
            person[pos[f]] = len(files) / len(focus_files)
    file_rank, flow = pagerank(g, person)
    d_file, d_ident, d_line, d_parent = (index[k] for k in ("d_file", "d_ident", "d_line",
                                                             "d_parent"))
    score = flow[d_ident] / g.ndefs[d_ident]  # [D] rank of each definition
    if focus_files:  # names the focus files use directly come first (Aider's mentioned idents)
        direct = np.zeros(g.n_idents)
        direct[g.ref_ident[np.isin(g.ref_file, [pos[f] for f in focus_files])]] = 1.0
        score = score * (1.0 + (FOCUS_IDENT_BOOST - 1.0) * direct[d_ident])
    order = np.lexsort((-file_rank[d_file], -score))
    file_order = {files[i]: float(r) for i, r in enumerate(file_rank)}
    items = []
    for k in order[: budget // 3 + 10]:
        parent = int(d_parent[k])
        items.append((files[d_file[k]], int(d_line[k]), texts[k],
                      int(d_line[parent]) if parent >= 0 else 0, texts[parent] if parent >= 0 else ""))
    where = f"; ranked toward {', '.join(p or '.' for p in focus)}" if focus else ""
    more = f" (the repository has {skipped} more source files; not mapped)" if skipped else ""
    header = (f"Repository map: {{shown}} definitions from {{nfiles}} of {len(files)} files"
              f"{more}{where}. Line numbers are for read_file.\n")
    text, shown = fit(items, file_order,
                      budget - estimate_tokens(header) - estimate_tokens(others) - 2)
    if others:
        text = text.rstrip("\n") + "\n\n" + others
    header = header.format(shown=shown, nfiles=len({it[0] for it in items[:shown]}))
    details = {"files": len(files), "definitions": shown, "tokens": estimate_tokens(header + text),
               "top_files": sorted(file_order, key=lambda f: -file_order[f])[:10]}
    store.put_result(key, (header + text, details))
    elapsed = time.perf_counter() - started
    if store.rebuilt:
        details["cache_rebuilt"] = True
    return ToolResult(True, header + text, {**details, "parsed": parsed, "cached": parsed == 0,
                                            "seconds": round(elapsed, 3)})
