"""Definitions and references of one source file.

Definitions come from the tree-sitter syntax tree: for Python a direct walk of module- and
class-level statements (fast: it skips function bodies); for other languages the tag queries in
queries.py. References are identifier tokens counted per file: for Python every identifier-like
token of the text (cheap), for the others the identifier nodes of the tree.
"""
from __future__ import annotations

import json
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from .languages import load_language
from .queries import CONTAINERS, QUERIES

KEYWORDS = {k.encode() for k in ("self", "None", "True", "False", "return", "def", "class",
                                  "import", "from", "for", "while", "not", "and", "with", "else",
                                  "elif", "try", "except", "raise", "yield", "lambda", "pass",
                                  "assert", "del", "global", "async", "await", "cls", "const",
                                  "let", "var", "function", "this", "new", "int", "str")}
IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_SIGNATURE = 160
PY_CONTAINERS = {"if_statement", "try_statement", "else_clause", "elif_clause", "except_clause",
                 "finally_clause", "block", "with_statement"}


@dataclass
class Definition:
    """One named definition: where it is and the line(s) that introduce it."""
    name: str
    line: int            # 1-based
    kind: str            # class | function | method | constant | ...
    text: str            # signature, on one line, with the original indentation
    parent_line: int = 0  # the enclosing class's line (0 at top level)


@dataclass
class FileTags:
    """What the repository map needs to know about one file.

    References are packed (names joined by newlines, counts as an int32 array) because a big
    repository has about a million (file, name) pairs and this form stores in milliseconds.
    """
    defs: list[Definition] = field(default_factory=list)
    ref_names: str = ""
    ref_counts: array = field(default_factory=lambda: array("i"))

    def to_row(self) -> tuple[str, str, bytes]:
        """(definitions as JSON, reference names, counts as int32 bytes): what the cache stores
        and the worker processes send (no pickle: docs/security.md)."""
        return (json.dumps([[d.name, d.line, d.kind, d.text, d.parent_line] for d in self.defs],
                           ensure_ascii=False), self.ref_names, self.ref_counts.tobytes())

    @classmethod
    def from_row(cls, row) -> "FileTags | None":
        """The inverse of to_row, or None when anything is not the expected shape."""
        try:
            defs_json, names, counts = row
            raw = json.loads(defs_json)
            if not all(type(d) is list and len(d) == 5 and type(d[0]) is str and type(d[1]) is int
                       and type(d[2]) is str and type(d[3]) is str and type(d[4]) is int for d in raw):
                return None
            defs = [Definition(*d) for d in raw]
            if not isinstance(names, str) or not isinstance(counts, bytes) or len(counts) % 4:
                return None
            ref_counts = array("i")
            ref_counts.frombytes(counts)
            if len(ref_counts) != (names.count("\n") + 1 if names else 0):
                return None
            return cls(defs, names, ref_counts)
        except (ValueError, TypeError):
            return None

    @property
    def ref_list(self) -> tuple[list[str], array]:
        """(names, counts) of the references, in matching order."""
        return (self.ref_names.split("\n") if self.ref_names else []), self.ref_counts

    @property
    def refs(self) -> dict[str, int]:
        """Referenced identifier -> number of occurrences."""
        if not self.ref_names:
            return {}
        return dict(zip(self.ref_names.split("\n"), self.ref_counts))


def references(data: bytes) -> tuple[str, array]:
    """Identifier tokens (3+ characters, keywords left out) and how often each occurs."""
    counts = Counter(IDENT.findall(data))
    for kw in KEYWORDS:
        counts.pop(kw, None)
    return b"\n".join(counts).decode("ascii"), array("i", counts.values())


def _drop_comment(line: bytes) -> bytes:
    """Cut a `# comment` off a line of a signature (a '#' inside quotes is kept)."""
    quote = None
    for i, c in enumerate(line):
        ch = chr(c)
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _signature(data: bytes, node, stop_node) -> str:
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    indent = data[line_start:node.start_byte]
    indent = indent if not indent.strip() else b""
    end = stop_node.start_byte if stop_node is not None else node.end_byte
    raw = data[node.start_byte:end]
    if b"#" in raw:
        raw = b"\n".join(_drop_comment(x) for x in raw.split(b"\n"))
    text = b" ".join(raw.split()).decode("utf-8", "replace").rstrip()
    text = text.replace("( ", "(").replace(" )", ")").replace("[ ", "[").replace(" ]", "]")
    if len(text) > MAX_SIGNATURE:
        text = text[:MAX_SIGNATURE - 3] + "..."
    return indent.decode("utf-8", "replace") + text


def _first_line(data: bytes, node) -> str:
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    line_end = data.find(b"\n", node.start_byte)
    text = data[line_start:line_end if line_end != -1 else len(data)].decode("utf-8", "replace")
    return text.rstrip()[:MAX_SIGNATURE]


def _assignment(data: bytes, node) -> str:
    """`NAME = value` when it is one short line, else `NAME = ...`."""
    text = data[node.start_byte:node.end_byte]
    if b"\n" not in text and len(text) <= 80:
        return text.decode("utf-8", "replace")
    right = node.child_by_field_name("right")
    return _signature(data, node, right).rstrip(" =") + " = ..."


def python_tags(data: bytes, parser) -> FileTags:
    """Definitions of a Python file from its syntax tree, plus identifier references."""
    tree = parser.parse(data)
    defs: list[Definition] = []

    def visit(node, parent_line: int, depth: int) -> None:
        for child in node.named_children:
            t = child.type
            if t == "decorated_definition":
                child = child.child_by_field_name("definition") or child
                t = child.type
            if t in ("class_definition", "function_definition"):
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                if name is None:
                    continue
                line = child.start_point[0] + 1
                kind = "class" if t == "class_definition" else ("method" if parent_line else "function")
                defs.append(Definition(name.text.decode("utf-8", "replace"), line, kind,
                                       _signature(data, child, body), parent_line))
                if t == "class_definition" and body is not None and depth < 4:
                    visit(body, line, depth + 1)
            elif t == "expression_statement" and not parent_line:
                for sub in child.named_children:
                    left = sub.child_by_field_name("left") if sub.type == "assignment" else None
                    if left is not None and left.type == "identifier":
                        defs.append(Definition(left.text.decode("utf-8", "replace"),
                                               child.start_point[0] + 1, "constant",
                                               _assignment(data, sub), 0))
            elif t in PY_CONTAINERS and depth < 4:
                visit(child, parent_line, depth + 1)

    visit(tree.root_node, 0, 0)
    return FileTags(defs, *references(data))


@lru_cache(maxsize=None)
def _compiled(module: str, func: str):
    """(parser, definition query, reference query) of a grammar, built once per process."""
    from tree_sitter import Parser, Query
    lang = load_language(module, func)
    defs_source, ref_types = QUERIES[(module, func)]
    refs_source = "[" + " ".join(f"({t})" for t in ref_types) + "] @ref"
    return Parser(lang), Query(lang, defs_source), Query(lang, refs_source)


def query_tags(data: bytes, module: str, func: str) -> FileTags:
    """Definitions and references via this package's tag queries (queries.py)."""
    from tree_sitter import QueryCursor
    parser, def_query, ref_query = _compiled(module, func)
    tree = parser.parse(data)
    found = []  # (start_byte, end_byte, line, name, kind, text)
    seen = set()
    for _, caps in QueryCursor(def_query).matches(tree.root_node):
        kinds = [k for k in caps if k.startswith("definition.")]
        if not kinds or "name" not in caps:
            continue
        node, name = caps[kinds[0]][0], caps["name"][0]
        key = (node.start_byte, name.start_byte)
        if key in seen:  # two patterns matched one definition
            continue
        seen.add(key)
        found.append((node.start_byte, node.end_byte, node.start_point[0] + 1,
                      name.text.decode("utf-8", "replace"), kinds[0].split(".", 1)[1],
                      _first_line(data, node)))
    found.sort()
    defs: list[Definition] = []
    open_containers: list[tuple[int, int]] = []  # (end_byte, line), innermost last
    for start, end, line, name, kind, text in found:
        while open_containers and open_containers[-1][0] <= start:
            open_containers.pop()
        parent = open_containers[-1][1] if open_containers else 0
        defs.append(Definition(name, line, kind, text, parent if parent != line else 0))
        if kind in CONTAINERS:
            open_containers.append((end, line))
    defs.sort(key=lambda d: d.line)
    counts: Counter = Counter()
    for nodes in QueryCursor(ref_query).captures(tree.root_node).values():
        for node in nodes:
            if node.end_byte - node.start_byte >= 3:
                counts[data[node.start_byte:node.end_byte]] += 1
    for kw in KEYWORDS:
        counts.pop(kw, None)
    names = b"\n".join(counts).decode("utf-8", "replace")
    return FileTags(defs, names, array("i", counts.values()))
