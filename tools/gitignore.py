"""`.gitignore` files for the walk outside git (inside git, `git ls-files` applies them itself).

The patterns are read by `pathspec` (GitIgnoreSpec: negation with `!`, anchoring, `dir/`-only
patterns, escapes), and every `.gitignore` on the way down applies to the paths under its own
folder, a deeper file's last matching line winning over a shallower one's, as in git. A folder
that is ignored is not walked, so nothing inside it can be re-included (git's rule too).

A repository is untrusted: pathspec matches with a backtracking regex, and a line with many `*`
(`*a*a*a*a*b`) takes seconds to minutes against one long name (measured: 7.5 s for 5 stars on a
200-character name). Lines with more than MAX_STARS runs of `*` are skipped (real ignore files
have one or two), and each `.gitignore` is read only when it is a regular file of at most
MAX_BYTES. A skipped line can only make the listing longer, never hide a file.

Two stars per line still cost the square of a long name per line (measured: 0.3 ms for
`*a*q1` against a 400-character path), so 60,000 such lines took over a minute for three files.
The total is bounded: at most MAX_LINES lines are kept per file, and each check is charged an
estimate of its regex time in nanoseconds (measured: a line with two runs of `*` about the
path's length squared, any other line about 16 per character plus 512) against MAX_WORK for the
whole walk (about 3 s). Once that is spent, the rules are no longer applied
(`exhausted`): the rest of the listing is longer, never shorter.
"""
from __future__ import annotations

import re
from pathlib import Path

from .textio import read_regular

MAX_STARS = 2  # runs of `*` per line (`**` is one run): a 4 KB path stays under 0.1 s per match
MAX_BYTES = 1 << 20
MAX_LINES = 10_000  # kept per ignore file (real ones have tens to hundreds)
MAX_WORK = 3_000_000_000  # estimated nanoseconds of one walk's ignore checks (measured costs below)
_STAR_RUN = re.compile(r"(?<!\\)\*+")


def _usable(line: str) -> bool:
    return len(_STAR_RUN.findall(line)) <= MAX_STARS


def _spec(folder: Path):
    """The GitIgnoreSpec of `folder/.gitignore`, or None when there is none worth reading."""
    try:
        text = read_regular(folder / ".gitignore", MAX_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):  # absent, not a regular file, too large
        return None
    import pathspec

    lines = [line for line in text.splitlines()[:MAX_LINES] if _usable(line)]
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):  # one bad line (`[z-a]`): keep the others, as git does
        good = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
                good.append(line)
            except (ValueError, re.error):
                pass
        spec = pathspec.GitIgnoreSpec.from_lines(good)
    if not spec.patterns:
        return None
    starred = sum(1 for p in spec.patterns if len(_STAR_RUN.findall(str(getattr(p, "pattern", "") or "**"))) > 1)
    return spec, starred, len(spec.patterns) - starred


class GitIgnores:
    """The ignore rules met on the way from `root` down; `ignored(rel, is_dir)` for a path below
    a folder whose rules were `enter`ed (repo-relative POSIX paths)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._chains: dict[str, tuple] = {}  # folder rel ("" root) -> ((base, spec), ...) root first
        self.work = 0  # estimated regex steps spent so far (MAX_WORK bounds it)
        self.exhausted = False  # the budget ran out: rules are no longer applied

    def enter(self, rel_dir: str) -> None:
        """Read the `.gitignore` of `rel_dir` ("" the root, else "a/b/"), and of its parents first."""
        missing = []  # the folders from rel_dir up whose rules are not read yet (no recursion:
        while rel_dir not in self._chains:  # a tree 1,500 levels deep is walked too)
            missing.append(rel_dir)
            if not rel_dir:
                break
            parent = rel_dir.rstrip("/").rpartition("/")[0]
            rel_dir = parent + "/" if parent else ""
        for folder in reversed(missing):
            parent = folder.rstrip("/").rpartition("/")[0]
            chain = self._chains[parent + "/" if parent else ""] if folder else ()
            spec = _spec(self.root / folder)
            self._chains[folder] = chain + ((folder, spec),) if spec is not None else chain

    def ignored(self, rel: str, is_dir: bool) -> bool:
        if self.exhausted:
            return False
        folder = rel.rpartition("/")[0]
        chain = self._chains.get(folder + "/" if folder else "", ())
        verdict = False
        size = len(rel) + 1
        for base, (spec, starred, plain) in chain:
            self.work += starred * size * size + plain * (16 * size + 512)
            if self.work > MAX_WORK:
                self.exhausted = True
                return False  # listed rather than hidden
            result = spec.check_file(rel[len(base):] + ("/" if is_dir else ""))
            if result.include is not None:  # the last matching line of the deepest file decides
                verdict = result.include
        return verdict


IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")  # what ripgrep reads in each folder it walks
MAX_SCAN_DIRS = 50_000


def unsafe_ignore_file(root: Path, sub: Path) -> str | None:
    """The first ignore file ripgrep would read searching `sub` (inside `root`) that is not a
    regular file of at most MAX_BYTES — a symlink to /dev/zero is read without end — or a
    reason the check could not finish; None when every one is safe. Hidden folders are not
    looked into (ripgrep does not enter them); the folders above `sub` are (ripgrep reads
    their ignore files too)."""
    import os
    import stat

    from .walk import walk

    def bad(folder: str, names) -> str | None:
        for name in IGNORE_FILES:
            if name in names:
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue  # dangling: ripgrep cannot read it either
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
                    return path
        return None

    here = os.path.dirname(os.fspath(sub))
    while True:  # the folders above: ripgrep reads their ignore files as well
        found = bad(here, IGNORE_FILES)
        if found or os.path.dirname(here) == here:
            if found:
                return found
            break
        here = os.path.dirname(here)
    if not os.path.isdir(sub):
        return None
    for count, (folder, dirs, files) in enumerate(walk(sub)):
        if count >= MAX_SCAN_DIRS:
            return f"more than {MAX_SCAN_DIRS:,} folders"
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found = bad(folder, set(files) | set(dirs))
        if found:
            return found
    return None
