"""An iterative `os.walk`: a directory tree thousands of levels deep (a hostile repository) is
walked with an explicit stack, never by recursion, so it cannot raise RecursionError (Python
3.11's own `os.walk` recurses once per level). Symlinks to folders are listed
with the folders, never followed (os.walk's default)."""
from __future__ import annotations

import os
from typing import Iterator


def walk(top: str | os.PathLike) -> Iterator[tuple[str, list[str], list[str]]]:
    """(dirpath, dirnames, filenames) top-down, as `os.walk(top)`: the caller may prune
    `dirnames` in place to skip folders; unreadable folders are skipped."""
    stack = [os.fspath(top)]
    while stack:
        here = stack.pop()
        dirs, files, links = [], [], set()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                        if is_dir and entry.is_symlink():
                            links.add(entry.name)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield here, dirs, files
        stack.extend(os.path.join(here, d) for d in reversed(dirs) if d not in links)
