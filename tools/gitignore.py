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
"""
from __future__ import annotations

import re
from pathlib import Path

from .textio import read_regular

MAX_STARS = 2  # runs of `*` per line (`**` is one run): a 4 KB path stays under 0.1 s per match
MAX_BYTES = 1 << 20
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

    lines = [line for line in text.splitlines() if _usable(line)]
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
    return spec if spec.patterns else None


class GitIgnores:
    """The ignore rules met on the way from `root` down; `ignored(rel, is_dir)` for a path below
    a folder whose rules were `enter`ed (repo-relative POSIX paths)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._chains: dict[str, tuple] = {}  # folder rel ("" root) -> ((base, spec), ...) root first

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
        folder = rel.rpartition("/")[0]
        chain = self._chains.get(folder + "/" if folder else "", ())
        verdict = False
        for base, spec in chain:
            result = spec.check_file(rel[len(base):] + ("/" if is_dir else ""))
            if result.include is not None:  # the last matching line of the deepest file decides
                verdict = result.include
        return verdict
