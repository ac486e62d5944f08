"""A checkpoint's manifest on disk: written with a digest of itself and a sha256 per blob, and
verified whole (manifest, every path, every blob) before undo restores anything
(docs/tools.md, "Checkpoints and undo")."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from . import fsat
from .paths import PathError, check_state_path

VERSION = 2
KINDS = ("file", "link", "absent")
_BLOB = re.compile(r"^\d{4,6}\Z")
_HEX = re.compile(r"^[0-9a-f]{64}\Z")


class CheckpointCorrupt(ValueError):
    """A checkpoint that cannot be trusted; str() is one line for the user."""


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def dump(body: dict) -> bytes:
    """The manifest file's bytes: `body` plus `digest`, the sha256 of its canonical form."""
    return json.dumps({**body, "digest": hashlib.sha256(_canonical(body)).hexdigest()},
                      indent=1, ensure_ascii=True).encode()


def file_sha(path: Path) -> tuple[str, int]:
    """(sha256 hex, size) of a file, read in chunks."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def load(cp_dir: Path, root: Path, blobs: bool = True) -> dict:
    """The verified manifest of the checkpoint in `cp_dir`; CheckpointCorrupt otherwise.

    Checks the digest, the schema, that every path stays inside `root` (relative, no `..`, no
    symlinked directory leading out), that a kept symlink points inside the root and, with
    `blobs`, that every blob exists with its recorded size and sha256."""
    try:
        raw = (cp_dir / "manifest.json").read_bytes()
    except FileNotFoundError:
        raise CheckpointCorrupt("its manifest is missing") from None
    except OSError as exc:
        raise CheckpointCorrupt(f"its manifest cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CheckpointCorrupt("its manifest is not valid JSON") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise CheckpointCorrupt("its manifest has an unknown format")
    digest = data.pop("digest", None)
    if digest != hashlib.sha256(_canonical(data)).hexdigest():
        raise CheckpointCorrupt("its manifest does not match its digest (changed or damaged)")
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise CheckpointCorrupt("its manifest lists no files")
    for e in entries:
        _check_entry(e, cp_dir, root, blobs)
    return data


def _check_entry(e: object, cp_dir: Path, root: Path, blobs: bool) -> None:
    if not isinstance(e, dict) or e.get("kind") not in KINDS:
        raise CheckpointCorrupt("its manifest has a malformed entry")
    try:
        rel = check_state_path(root, e.get("path"))
        if e.get("created_dir") is not None:
            top = check_state_path(root, e["created_dir"])
            if not rel.startswith(top + "/"):
                raise PathError(f"{top!r} is not a directory of {rel!r}")
    except PathError as exc:
        raise CheckpointCorrupt(f"unsafe path in its manifest: {exc}") from None
    after = e.get("after")
    if after is not None and not isinstance(after, str):
        raise CheckpointCorrupt(f"malformed entry for {rel}")
    if e["kind"] == "link":
        _check_link(root, rel, e.get("link"))
    elif e["kind"] == "file":
        blob, sha, size, mode = e.get("blob"), e.get("sha256"), e.get("size"), e.get("mode")
        if not (isinstance(blob, str) and _BLOB.match(blob) and isinstance(sha, str)
                and _HEX.match(sha) and type(size) is int and size >= 0
                and type(mode) is int and 0 <= mode <= 0o7777):
            raise CheckpointCorrupt(f"malformed entry for {rel}")
        if blobs:
            try:
                got, got_size = file_sha(cp_dir / "blobs" / blob)
            except OSError:
                raise CheckpointCorrupt(f"the saved copy of {rel} is missing") from None
            if got_size != size:
                raise CheckpointCorrupt(f"the saved copy of {rel} is truncated or damaged "
                                        f"({got_size} of {size} bytes)")
            if got != sha:
                raise CheckpointCorrupt(f"the saved copy of {rel} is damaged (sha256 mismatch)")


def _check_link(root: Path, rel: str, target: object) -> None:
    if not isinstance(target, str) or not target or "\x00" in target:
        raise CheckpointCorrupt(f"malformed symlink entry for {rel}")
    base = Path(root).resolve()
    where = os.path.normpath(os.path.join(base, os.path.dirname(rel), target))
    if where != str(base) and not where.startswith(str(base) + os.sep):
        raise CheckpointCorrupt(f"the saved symlink {rel} -> {target} leads outside the root")


def unchanged(root: Path, e: dict) -> bool:
    """Whether a manifest entry's path (and the folder it would have created) is still as saved."""
    try:
        now = fsat.probe(root, e["path"])
        if now.kind != e["kind"]:
            return False
        if now.kind == "absent":
            return not e.get("created_dir") or fsat.probe(root, e["created_dir"], read=False).kind == "absent"
    except (OSError, ValueError):
        return False
    if now.kind == "link":
        return now.link == e.get("link")
    return now.mode == e.get("mode") and hashlib.sha256(now.data or b"").hexdigest() == e.get("sha256")
