"""Rank files and definitions with personalised PageRank over the reference graph.

The idea is Aider's repository map (aider/repomap.py): file A references identifier x which
file B defines -> an edge A->B weighted by how often A uses x, boosted for long descriptive
names, damped for private names and names defined in many files; PageRank personalised toward
the files in focus. We never build the A->B edges (a common name defined in 1,000 files and used
in 1,000 would make a million): the walk goes A -> x -> B, where x spreads its mass evenly over
its definers. One deliberate difference: Aider weights each A->B edge separately, so a name
defined in many files pulls that many times harder; here a reference to a name counts once and
is shared among its definers (which one is meant is unknown), which keeps a focus file's
specific references (its config class, its helpers) ahead of `forward` or `__init__`.
Implemented with numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Graph:
    """The file -> identifier -> file graph in coordinate form."""
    n_files: int
    n_idents: int
    ref_file: np.ndarray    # [E] int32: referencing file of each (file, ident) pair
    ref_ident: np.ndarray   # [E] int32
    ref_weight: np.ndarray  # [E] float64: mul(ident) * sqrt(count)
    def_ident: np.ndarray   # [D] int32: each (ident, defining file) pair
    def_file: np.ndarray    # [D] int32
    ndefs: np.ndarray       # [I] float64: number of files defining each identifier


def ident_multiplier(name: str, ndefs: int) -> float:
    """Aider's weighting of one identifier."""
    mul = 1.0
    descriptive = ("_" in name.strip("_") or (any(c.isupper() for c in name)
                                              and any(c.islower() for c in name)))
    if descriptive and len(name) >= 8:
        mul *= 10
    if name.startswith("_"):
        mul *= 0.1
    if ndefs > 5:
        mul *= 0.1
    return mul


def build_graph(defs_by_file: list[set[str]],
                refs_by_file: list[dict[str, int] | tuple[list[str], object]]) -> tuple[Graph, list[str]]:
    """Build the graph from each file's defined names and its references.

    A file's references are a {name: count} dict or a (names, counts) pair of sequences.
    Returns the graph and the identifier vocabulary (index -> name).
    """
    vocab: dict[str, int] = {}
    def_ident, def_file = [], []
    for f, names in enumerate(defs_by_file):
        for name in names:
            def_ident.append(vocab.setdefault(name, len(vocab)))
            def_file.append(f)
    n_idents, n_files = len(vocab), len(defs_by_file)
    d_ident = np.asarray(def_ident, dtype=np.int64)
    d_file = np.asarray(def_file, dtype=np.int64)
    ndefs = np.bincount(d_ident, minlength=n_idents).astype(np.float64)  # [I]
    sole = np.full(n_idents, -1, dtype=np.int64)  # [I] the only definer, or -1
    one = ndefs[d_ident] == 1
    sole[d_ident[one]] = d_file[one]
    mults = np.array([ident_multiplier(name, int(ndefs[i])) for name, i in vocab.items()])  # [I]
    files, idents, counts = [], [], []
    for f, refs in enumerate(refs_by_file):
        count_of = refs if isinstance(refs, dict) else dict(zip(*refs))
        common = list(count_of.keys() & vocab.keys())  # set work in C; most names define nothing
        ids = np.fromiter((vocab[n] for n in common), np.int64, len(common))
        c = np.fromiter((count_of[n] for n in common), np.float64, len(common))
        keep = sole[ids] != f  # a file using its own definitions says nothing
        idents.append(ids[keep])
        counts.append(c[keep])
        files.append(np.full(int(keep.sum()), f, dtype=np.int64))
    r_ident = np.concatenate(idents) if idents else np.zeros(0, np.int64)  # [E]
    r_count = np.concatenate(counts) if counts else np.zeros(0)  # [E]
    r_file = np.concatenate(files) if files else np.zeros(0, np.int64)  # [E]
    graph = Graph(n_files, n_idents, r_file.astype(np.int32), r_ident.astype(np.int32),
                  mults[r_ident] * np.sqrt(r_count), d_ident.astype(np.int32),
                  d_file.astype(np.int32), ndefs)
    return graph, list(vocab)


def pagerank(g: Graph, personalization: np.ndarray, damping: float = 0.85,
             max_iter: int = 60, tol: float = 1e-7) -> tuple[np.ndarray, np.ndarray]:
    """Personalised PageRank over files.

    personalization: [F] non-negative teleport weights (normalised here).
    Returns (file_rank [F], ident_flow [I]): the rank of each file and the mass flowing through
    each identifier at convergence (a definition's rank is ident_flow / ndefs).
    """
    n = g.n_files
    p = personalization.astype(np.float64)
    p = p / p.sum() if p.sum() > 0 else np.full(n, 1.0 / max(n, 1))
    out_w = np.bincount(g.ref_file, weights=g.ref_weight, minlength=n)  # [F]
    dangling = out_w == 0
    trans = g.ref_weight / np.where(out_w[g.ref_file] > 0, out_w[g.ref_file], 1.0)  # [E]
    spread = 1.0 / g.ndefs[g.def_ident]  # [D]
    x = p.copy()
    flow = np.zeros(g.n_idents)
    for _ in range(max_iter):
        flow = np.bincount(g.ref_ident, weights=x[g.ref_file] * trans, minlength=g.n_idents)  # [I]
        y = np.bincount(g.def_file, weights=flow[g.def_ident] * spread, minlength=n)  # [F]
        y = damping * (y + x[dangling].sum() * p) + (1.0 - damping) * p
        delta = np.abs(y - x).sum()
        x = y
        if delta < tol:
            break
    return x, flow
