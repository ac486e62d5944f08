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

Inside git, `git ls-files --exclude-standard` matches every path against every line itself, with
no bound but the git timeout (measured: 60,000 lines `*a*qN` and one 2,200-character path, 42 s
for git alone, 58 s for `clover tool list_files` on a busy 2-core machine). So git is handed the
ignore files only within a budget (`heavy_ignores`: GIT_MAX_LINES pattern lines over every
`.gitignore` and `.git/info/exclude`, GIT_MAX_STARRED of them with two or more runs of `*`, each
file regular and at most MAX_BYTES); past it, tools/files.py lists the tracked files from git's
index (no matching) and the untracked ones with the bounded walk above.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .textio import read_regular

MAX_STARS = 2  # runs of `*` per line (`**` is one run): a 4 KB path stays under 0.1 s per match
MAX_BYTES = 1 << 20
MAX_LINES = 10_000  # kept per ignore file (real ones have tens to hundreds)
MAX_WORK = 3_000_000_000  # estimated nanoseconds of one walk's ignore checks (measured costs below)
COMPILE_NS = 120_000  # a line's share of reading a file's rules (measured: 10,000 `*a*qN` lines, 1.1 s)
GIT_MAX_LINES = 5_000  # pattern lines git may be handed, over all ignore files
GIT_MAX_STARRED = 64  # of those, lines with two or more runs of `*` (each costs a path's length squared)
_STAR_RUN = re.compile(r"(?<!\\)\*+")


def _usable(line: str) -> bool:
    return len(_STAR_RUN.findall(line)) <= MAX_STARS


def _spec(folder: Path, max_lines: int = MAX_LINES):
    """The GitIgnoreSpec of `folder/.gitignore`, or None when there is none worth reading, or
    the number of its lines when they are more than `max_lines` (the budget left: not read)."""
    try:
        text = read_regular(folder / ".gitignore", MAX_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):  # absent, not a regular file, too large
        return None
    import pathspec

    lines = [line for line in text.splitlines()[:MAX_LINES] if _usable(line)]
    if len(lines) > max_lines:
        return len(lines)
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
    return spec, starred, len(spec.patterns) - starred, len(lines)


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
            spec = None if self.exhausted else _spec(self.root / folder, (MAX_WORK - self.work) // COMPILE_NS)
            if isinstance(spec, int):  # reading these rules would spend more than is left
                self.work, self.exhausted, spec = MAX_WORK, True, None
            elif spec is not None:
                self.work += spec[3] * COMPILE_NS  # reading the rules is work too
                spec = spec[:3]
            self._chains[folder] = chain + ((folder, spec),) if spec is not None else chain

    def ignored(self, rel: str, is_dir: bool) -> bool:
        if self.exhausted:
            return False
        folder = rel.rpartition("/")[0]
        chain = self._chains.get(folder + "/" if folder else "", ())
        verdict = False
        size = len(rel) + 1
        for base, (spec, starred, plain) in chain:
            cost = starred * size * size + plain * (16 * size + 512)
            if self.work + cost > MAX_WORK:
                self.exhausted = True
                return False  # listed rather than hidden
            self.work += cost
            result = spec.check_file(rel[len(base):] + ("/" if is_dir else ""))
            if result.include is not None:  # the last matching line of the deepest file decides
                verdict = result.include
        return verdict


_heavy_seen: dict[str, tuple[float, str | None]] = {}  # root -> (when, answer): one listing asks twice
HEAVY_FRESH = 2.0  # seconds an answer is reused


def heavy_ignores(root: Path) -> str | None:
    """Why git must not be handed the ignore files of the repository at `root` (too many lines,
    too many starred lines, one that is not a regular file or too large), or None when it may
    (`_heavy`; the answer is reused for HEAVY_FRESH seconds: one listing asks twice)."""
    import time

    key = str(root)
    seen = _heavy_seen.get(key)
    if seen is not None and time.monotonic() - seen[0] < HEAVY_FRESH:
        return seen[1]
    answer = _heavy(root)
    _heavy_seen.clear()  # one entry: the repository in use
    _heavy_seen[key] = (time.monotonic(), answer)
    return answer


def _heavy(root: Path) -> str | None:
    """heavy_ignores without the cache: the top-level files first (read directly; over budget,
    no walk at all), then the nested `.gitignore` files git finds with only those top-level
    rules applied (so an ignored `.venv` is not walked; nested rules are not read by git)."""
    from .gitutil import git_run

    top = git_run(root, "rev-parse", "--show-toplevel").stdout.decode("utf-8", "replace").strip()
    if not top:
        return None  # the listing proper reports git's trouble
    count = [0, 0]  # pattern lines, starred lines
    tops = [rel for rel in (".gitignore", ".git/info/exclude") if os.path.isfile(os.path.join(top, rel))]
    why = _count(top, [".gitignore", ".git/info/exclude"], count)
    if why is None:
        res = git_run(root, "ls-files", "-z", "--cached", "--others", "--full-name",
                      *(f"--exclude-from={os.path.join(top, rel)}" for rel in tops), "--",
                      ":(glob)**/.gitignore")
        names = [n for n in res.stdout.decode("utf-8", "replace").split("\0") if n and n != ".gitignore"]
        why = _count(top, names, count)
    return why


def _count(top: str, rels: list[str], count: list[int]) -> str | None:
    """Adds the pattern lines of the files `rels` (under `top`) to `count`; why git must not be
    handed them once over budget, else None."""
    for rel in rels:
        try:
            text = read_regular(os.path.join(top, rel), MAX_BYTES).decode("utf-8", "replace")
        except (FileNotFoundError, NotADirectoryError):  # none; `.git` a file (a worktree)
            continue
        except (OSError, ValueError):  # not a regular file (a FIFO, a link to /dev/zero), too large
            return f"{rel} is not a regular file of at most {MAX_BYTES:,} bytes"
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                count[0] += 1
                count[1] += len(_STAR_RUN.findall(line)) > 1
        if count[0] > GIT_MAX_LINES or count[1] > GIT_MAX_STARRED:
            return (f"the ignore files hold over {GIT_MAX_LINES:,} patterns or {GIT_MAX_STARRED} with "
                    f"several `*` ({rel}: git's matching has no bound of its own)")
    return None


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
