"""Worker process for parsing many files at once: `python -m clover_cli.tools.repomap.worker ROOT`
reads a JSON list of repo-relative paths on stdin and writes JSON
{path: null | [definitions JSON, reference names, reference counts]} (no pickle: docs/security.md).

A plain subprocess (not multiprocessing) so that the caller's main module is never re-imported.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    from .cache import extract
    root = Path(sys.argv[1])
    rels = json.loads(sys.stdin.read())
    out = {}
    for rel in rels:
        tags = extract(root, rel)
        out[rel] = None if tags is None else [*tags.to_row()[:2], tags.ref_counts.tolist()]
    sys.stdout.buffer.write(json.dumps(out).encode("ascii"))


if __name__ == "__main__":
    main()
