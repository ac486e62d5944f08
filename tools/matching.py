"""Locate a block of lines in a file: exactly, then tolerantly (trailing whitespace, a
consistent indentation shift; line endings never matter). Shared by apply_patch and edit_file.
Also finds the closest lines for a failure message."""
from __future__ import annotations

import bisect
import difflib
import re
from dataclasses import dataclass

from .textio import body

TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Match:
    """Where a block matched: start index into the file's lines and how leniently."""
    start: int
    level: str            # "exact" | "trailing-whitespace" | "indentation"
    add_indent: str = ""  # the file is indented deeper than the block by this prefix
    drop_indent: str = ""  # the block is indented deeper than the file by this prefix

    def reindent(self, line: str) -> str:
        """Shift a replacement line the way the block was shifted to match the file."""
        if not line.strip():
            return line
        if self.add_indent:
            return self.add_indent + line
        if self.drop_indent and line.startswith(self.drop_indent):
            return line[len(self.drop_indent):]
        return line


def _indent(s: str) -> str:
    return s[: len(s) - len(s.lstrip())]


def _indent_shift(file_block: list[str], block: list[str]) -> tuple[str, str] | None:
    """A single prefix that turns the block's indentation into the file's, if one exists."""
    add = drop = None
    for f, b in zip(file_block, block):
        if not b.strip():
            continue
        fi, bi = _indent(f), _indent(b)
        if fi.endswith(bi) and (add is None or add == fi[: len(fi) - len(bi)]) and drop in (None, ""):
            add = fi[: len(fi) - len(bi)]
            drop = ""
        elif bi.endswith(fi) and (drop is None or drop == bi[: len(bi) - len(fi)]) and add in (None, ""):
            drop = bi[: len(bi) - len(fi)]
            add = ""
        else:
            return None
    return (add or "", drop or "")


LEVELS = (("exact", lambda s: s), ("trailing-whitespace", str.rstrip), ("indentation", str.strip))


class Claims:
    """Regions of a file that earlier hunks took: a match may not overlap a claimed line, nor
    straddle the point where a pure insertion goes. Each check costs the block's length."""

    def __init__(self, n: int) -> None:
        self.lines = bytearray(n)
        self.points: list[int] = []  # sorted insertion points

    def add(self, region: range) -> None:
        if len(region):
            self.lines[region.start:region.stop] = b"\x01" * len(region)
        else:
            bisect.insort(self.points, region.start)

    def free(self, i: int, m: int) -> bool:
        if 1 in self.lines[i:i + m]:
            return False
        k = bisect.bisect_right(self.points, i)
        return k == len(self.points) or self.points[k] >= i + m


class BlockFinder:
    """`find_block` for many blocks in one file: the line bodies, each level's normalised lines
    and an index from a line to its positions are built once, so a block costs the occurrences
    of its rarest line instead of the file's length (a patch of 10,000 hunks stays linear)."""

    def __init__(self, lines: list[str]) -> None:
        self.bodies = [body(x) for x in lines]
        self._levels: dict[str, tuple[list[str], dict[str, list[int]]]] = {}

    def _level(self, level: str, norm) -> tuple[list[str], dict[str, list[int]]]:
        if level not in self._levels:
            have = [norm(b) for b in self.bodies]
            where: dict[str, list[int]] = {}
            for i, line in enumerate(have):
                where.setdefault(line, []).append(i)
            self._levels[level] = (have, where)
        return self._levels[level]

    def find(self, block: list[str], claims: Claims | None = None) -> list[Match]:
        """All places where `block` (line bodies) occurs, in file order; the first level with a
        match wins; places that `claims` rules out are skipped."""
        n, m = len(self.bodies), len(block)
        if not block or m > n:
            return []
        for level, norm in LEVELS:
            have, where = self._level(level, norm)
            want = [norm(b) for b in block]
            anchor = min(range(m), key=lambda j: len(where.get(want[j], ())))
            found = []
            for p in where.get(want[anchor], ()):
                i = p - anchor
                if i < 0 or i + m > n or have[i:i + m] != want:
                    continue
                if claims is not None and not claims.free(i, m):
                    continue
                if level == "indentation":
                    shift = _indent_shift(self.bodies[i:i + m], block)
                    if shift is None:
                        continue
                    found.append(Match(i, level, *shift))
                else:
                    found.append(Match(i, level))
            if found:
                return found
        return []


def find_block(lines: list[str], block: list[str], *, exclude: list[range] = ()) -> list[Match]:
    """All places where `block` (line bodies) occurs in `lines` (file lines, terminators kept).

    Levels are tried in order and the first level with any match wins. Matches that overlap a
    range in `exclude` (regions already claimed by earlier hunks) are skipped. For many blocks
    in one file, use one `BlockFinder` and `Claims`.
    """
    claims = Claims(len(lines))
    for region in exclude:
        claims.add(region)
    return BlockFinder(lines).find(block, claims)


def _tokens(line: str) -> frozenset:
    return frozenset(TOKEN.findall(line))


def closest_lines(lines: list[str], block: list[str], context: int = 1) -> tuple[int, list[str], float]:
    """The window of `lines` most similar to `block`: (start index, window lines, ratio).

    Windows are first scored cheaply (token-set overlap of each aligned line pair), then the
    best few are compared character by character with difflib.
    """
    bodies = [body(x) for x in lines]
    if not bodies or not block:
        return 0, bodies[: len(block) + context], 0.0
    m = max(1, len(block))
    n_windows = max(1, len(bodies) - m + 1)
    file_tokens = [_tokens(b) for b in bodies]
    scores = [0.0] * n_windows
    for j, want in enumerate(_tokens(b) for b in block):
        if not want:
            continue
        for i in range(n_windows):
            if i + j >= len(file_tokens):
                break
            have = file_tokens[i + j]
            if have:
                common = len(want & have)
                if common:
                    scores[i] += common / len(want | have)
    best_windows = sorted(range(n_windows), key=lambda i: -scores[i])[:8]
    target = "\n".join(x.strip() for x in block)
    best_ratio, best_i = -1.0, best_windows[0]
    for i in best_windows:
        r = difflib.SequenceMatcher(None, "\n".join(x.strip() for x in bodies[i:i + m]), target,
                                    autojunk=False).ratio()
        if r > best_ratio:
            best_ratio, best_i = r, i
    lo = max(0, best_i - context)
    hi = min(len(bodies), best_i + m + context)
    return lo, bodies[lo:hi], best_ratio


def describe_failure(what: str, rel: str, lines: list[str], block: list[str]) -> str:
    """The text the model reads when a block is not found: what was expected, what is there."""
    start, window, ratio = closest_lines(lines, block)
    expected = "\n".join("  " + b for b in block) or "  (nothing)"
    out = [f"{what}: these lines were not found in {rel}:", expected]
    if window:
        out.append(f"Closest lines in {rel} (lines {start + 1}-{start + len(window)}, "
                   f"{ratio:.0%} similar):")
        out.extend(f"{start + k + 1:6d}\t{w}" for k, w in enumerate(window))
    out.append("Re-read the file and retry with lines copied exactly from it.")
    return "\n".join(out)


def describe_ambiguity(what: str, rel: str, matches: list[Match]) -> str:
    """The text the model reads when a block matches in several places."""
    where = ", ".join(str(mt.start + 1) for mt in matches[:10])
    return (f"{what} is ambiguous: it matches {len(matches)} places in {rel} (starting at lines "
            f"{where}). Include more surrounding lines so it matches exactly one place.")
