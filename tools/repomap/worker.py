"""Worker process for parsing many files at once: `python -m clover_cli.tools.repomap.worker ROOT`
reads a JSON list of repo-relative paths on stdin and writes a pickle of {path: FileTags|None}.

A plain subprocess (not multiprocessing) so that the caller's main module is never re-imported.
"""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path


def main() -> None:
    from .cache import extract
    root = Path(sys.argv[1])
    rels = json.loads(sys.stdin.read())
    out = {rel: extract(root, rel) for rel in rels}
    sys.stdout.buffer.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    main()
