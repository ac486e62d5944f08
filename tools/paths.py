"""Path safety: every path a tool touches must resolve inside the repository root."""
from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = ".clover"  # a repository's own Clover folder (config); never listed, searched or edited
NAME_MAX = 255    # bytes in one file name (Linux, macOS)
PATH_MAX = 4096   # bytes in a whole path


class PathError(ValueError):
    """A path that leads outside the repository root or into a protected directory."""


def resolve_in_root(root: Path, path: str | None, *, for_write: bool = False) -> Path:
    """Resolve `path` (relative to `root`, or absolute) and refuse anything outside the root.

    Symlinks are followed before the check, so a link that points outside is refused too.
    Writes into any `.git/` (nested repositories' too) or to a `.git` file (`gitdir:`), and every
    access to `.clover/`, are refused.
    """
    root_r = Path(root).resolve()
    if path is None or str(path).strip() == "":
        return root_r
    text = str(path)
    if "\x00" in text:
        raise PathError("path contains a NUL byte")
    _check_lengths(text)
    candidate = Path(text)
    full = candidate if candidate.is_absolute() else root_r / candidate
    resolved = full.resolve()
    try:
        rel = resolved.relative_to(root_r)
    except ValueError:
        how = "an absolute path" if candidate.is_absolute() else "a path"
        if full.is_symlink() or _has_symlink_parent(root_r, full):
            how = "a symlink"
        raise PathError(f"refused: {text!r} is {how} that leads outside the repository root "
                        f"({root_r}); use a path inside the repository") from None
    if rel.parts and rel.parts[0] == PRIVATE_DIR:
        raise PathError(f"refused: {text!r} is inside {PRIVATE_DIR}/, Clover's private state")
    if for_write and ".git" in rel.parts:
        raise PathError(f"refused: {text!r} is a .git file or inside a .git/ folder (nested ones "
                        "too); tools never write git internals")
    return resolved


def resolve_link_in_root(root: Path, path: str, *, for_write: bool = False) -> Path:
    """Like resolve_in_root, but a symlink is returned as the link itself (its directory
    resolved), for deleting or renaming the link rather than its target.

    The link's target must still resolve inside the root (a link that leads outside is refused
    as before), and the link must not sit in `.clover/` (or `.git/` for writes).
    """
    root_r = Path(root).resolve()
    text = str(path)
    if "\x00" in text:
        raise PathError("path contains a NUL byte")
    _check_lengths(text)
    candidate = Path(text)
    full = candidate if candidate.is_absolute() else root_r / candidate
    if full.name in ("", ".", "..") or not full.is_symlink():
        return resolve_in_root(root, path, for_write=for_write)
    resolve_in_root(root, path, for_write=for_write)  # the target stays inside the root
    parent = resolve_in_root(root, str(full.parent), for_write=for_write)
    link = parent / full.name
    rel = link.relative_to(root_r)
    if rel.parts and rel.parts[0] == PRIVATE_DIR:
        raise PathError(f"refused: {text!r} is inside {PRIVATE_DIR}/, Clover's private state")
    if for_write and ".git" in rel.parts:
        raise PathError(f"refused: {text!r} is a .git file or inside a .git/ folder (nested ones "
                        "too); tools never write git internals")
    return link


def _check_lengths(text: str) -> None:
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        raise PathError("path contains characters that cannot be a file name") from None
    if len(raw) > PATH_MAX:
        raise PathError(f"path is {len(raw)} bytes long; the limit is {PATH_MAX}")
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        raise PathError(f"a file name in the path is {longest} bytes long; the limit is "
                        f"{NAME_MAX} bytes per name")


def check_state_path(root: Path, rel: object) -> str:
    """Validate a path read back from Clover's own state (a checkpoint manifest, a session
    record): a plain relative POSIX string, no `.`/`..`/empty parts, not in `.git/` or `.clover/`,
    and no symlinked directory on the way leading outside the root. Returns it; PathError else."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\x00" in rel:
        raise PathError(f"refused: {rel!r} is not a repository-relative path")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise PathError(f"refused: {rel!r} is not a plain repository-relative path")
    _check_lengths(rel)
    if parts[0] in (PRIVATE_DIR, ".git"):
        raise PathError(f"refused: {rel!r} is inside {parts[0]}/")
    root_r = Path(root).resolve()
    parent = (root_r / rel).parent.resolve()
    if parent != root_r and root_r not in parent.parents:
        raise PathError(f"refused: {rel!r} leads outside the repository root ({root_r})")
    return rel


def _has_symlink_parent(root: Path, full: Path) -> bool:
    probe = full
    while probe != probe.parent:
        if probe.is_symlink():
            return True
        probe = probe.parent
    return False


def relpath(root: Path, path: Path) -> str:
    """The repository-relative POSIX form of an already resolved path (a symlink from
    resolve_link_in_root keeps its own name)."""
    path = Path(path)
    if path.is_symlink():
        path = path.parent.resolve() / path.name
    else:
        path = path.resolve()
    try:
        rel = path.relative_to(Path(root).resolve())
    except ValueError:  # it moved out of the root since it was resolved (a swapped directory)
        raise PathError(f"refused: {path} is no longer inside the repository root") from None
    return rel.as_posix() or "."
