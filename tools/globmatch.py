"""Glob matching without backtracking (docs/tools.md, "Globs").

The glob language (`*` within one path part, `**` across parts, `**/` zero or
more whole directories, `?`, `[...]` / `[!...]`, `{a,b}` as ripgrep reads them), but matching does
not go through a backtracking regex: `*a*a*a...*b` against a long name takes time exponential in
the stars there. The glob is compiled to a Thompson NFA (Ken Thompson, "Regular expression search
algorithm", CACM 1968) and run as a lazily built DFA (Russ Cox, "Regular Expression Matching Can Be
Simple And Fast", 2007), so a match costs O(len(name)) dictionary steps once the DFA states it
visits are built, and at most O(len(name) * len(glob)) the first time.

Kept rather than pathspec (a backtracking regex: seconds for one `*a*a*a*a*b`, measured in
tools/gitignore.py) or fnmatch (no `**`, no `{a,b}`): the agent's globs are untrusted input.
"""
from __future__ import annotations

import re
import warnings
from functools import lru_cache

from .argcheck import MAX_GLOB_BYTES, utf8_size
from .files import GlobError

_ANY, _NOSLASH = "any", "noslash"
_MAX_DFA_STATES = 4096  # per compiled glob; the cache starts over beyond this


class _Program:
    """NFA: per state a kind ("char", "split", "match"), a test (for "char") and successors."""

    def __init__(self) -> None:
        self.kind: list[str] = []
        self.test: list[object] = []
        self.out: list[list[int]] = []

    def add(self, kind: str, test: object = None, out: list[int] | None = None) -> int:
        self.kind.append(kind)
        self.test.append(test)
        self.out.append(out or [])
        return len(self.kind) - 1


def _class(pattern: str, body: str, negate: bool) -> re.Pattern:
    cls = body.replace("\\", "\\\\").replace("[", "\\[")
    if cls == "^":  # `[^]`: a lone caret is the character itself, not an empty negation
        cls = "\\^"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "possible set difference" and friends
            return re.compile(("[^" if negate else "[") + cls + "]", re.S)
    except re.error as exc:
        raise GlobError(f"invalid glob {pattern!r}: {exc.msg}") from None


def _emit(prog: _Program, pattern: str, glob: str, nxt: int) -> int:
    """Compiles `pattern` (a glob or one `{...}` alternative of it) to states ending in `nxt`;
    returns its start state. Items are laid out back to front, each pointing at the next."""
    items: list[tuple[str, object]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            items.append(("dirs", None))
            i += 3
        elif pattern.startswith("**", i):
            items.append(("star", _ANY))
            i += 2
        elif c == "*":
            items.append(("star", _NOSLASH))
            i += 1
        elif c == "?":
            items.append(("char", _NOSLASH))
            i += 1
        elif c == "[":
            first = i + 2 if pattern.startswith("!", i + 1) else i + 1
            j = pattern.find("]", first + 1)  # a `]` at `first` is part of the class
            if j == -1:
                items.append(("char", c))
                i += 1
            else:
                items.append(("char", _class(glob, pattern[first:j], first == i + 2)))
                i = j + 1
        elif c == "{" and "}" in pattern[i + 1:]:
            j = pattern.index("}", i + 1)
            items.append(("alt", pattern[i + 1:j].split(",")))
            i = j + 1
        else:
            items.append(("char", c))
            i += 1
    for kind, arg in reversed(items):
        if kind == "char":
            nxt = prog.add("char", arg, [nxt])
        elif kind == "star":  # loop: (arg)*
            loop = prog.add("split")
            step = prog.add("char", arg, [loop])
            prog.out[loop] = [step, nxt]
            nxt = loop
        elif kind == "dirs":  # (?:.*/)?
            slash = prog.add("char", "/", [nxt])
            loop = prog.add("split")
            step = prog.add("char", _ANY, [loop])
            prog.out[loop] = [step, slash]
            nxt = prog.add("split", None, [loop, nxt])
        else:  # alternatives, each compiled to end in the same next state
            nxt = prog.add("split", None, [_emit(prog, alt, glob, nxt) for alt in arg])  # type: ignore[union-attr]
    return nxt


def _accepts(test: object, ch: str) -> bool:
    if test is _ANY:
        return True
    if test is _NOSLASH:
        return ch != "/"
    if isinstance(test, str):
        return ch == test
    return test.match(ch) is not None  # type: ignore[union-attr]


class GlobMatcher:
    """One compiled glob; `matches(text)` is a whole-string match."""

    def __init__(self, glob: str) -> None:
        if utf8_size(glob) > MAX_GLOB_BYTES:
            raise GlobError(f"invalid glob: {utf8_size(glob):,} bytes long; the limit is "
                            f"{MAX_GLOB_BYTES:,} bytes")
        self.prog = _Program()
        final = self.prog.add("match")
        start = _emit(self.prog, glob, glob, final)
        self._closures: dict[int, frozenset[int]] = {}
        self._start = self._closure([start])
        self._steps: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _closure(self, states: list[int]) -> frozenset[int]:
        """The "char" and "match" states reachable from `states` through splits (iteratively)."""
        seen: set[int] = set()
        out: set[int] = set()
        stack = list(states)
        kind, succ = self.prog.kind, self.prog.out
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            if kind[s] == "split":
                stack.extend(succ[s])
            else:
                out.add(s)
        return frozenset(out)

    def _step(self, current: frozenset[int], ch: str) -> frozenset[int]:
        key = (current, ch)
        found = self._steps.get(key)
        if found is not None:
            return found
        targets = [self.prog.out[s][0] for s in current
                   if self.prog.kind[s] == "char" and _accepts(self.prog.test[s], ch)]
        found = self._closure(targets)
        if len(self._steps) >= _MAX_DFA_STATES:
            self._steps.clear()
        self._steps[key] = found
        return found

    def matches(self, text: str) -> bool:
        current = self._start
        for ch in text:
            current = self._step(current, ch)
            if not current:
                return False
        return any(self.prog.kind[s] == "match" for s in current)


@lru_cache(maxsize=256)
def compile_glob(glob: str) -> GlobMatcher:
    """The matcher of `glob`; GlobError when a class cannot be read or the glob is too long."""
    return GlobMatcher(glob)


def check_glob(glob: str) -> None:
    """Raises GlobError (a one-line message) when `glob` cannot be used."""
    compile_glob(glob.strip())


def glob_match(rel: str, pattern: str) -> bool:
    """Match a repo-relative path; a pattern without '/' matches the file name at any depth
    (as gitignore and ripgrep read such a pattern)."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if "/" not in pattern:
        return compile_glob(pattern).matches(rel.rsplit("/", 1)[-1])
    return compile_glob(pattern.lstrip("/")).matches(rel)
