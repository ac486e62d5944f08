"""Path safety: every path a tool touches must resolve inside the repository root."""
from __future__ import annotations

from pathlib import Path

PRIVATE_DIR = ".clover"  # Clover's own state (checkpoints, caches); never listed, searched or edited


class PathError(ValueError):
    """A path that leads outside the repository root or into a protected directory."""


def resolve_in_root(root: Path, path: str | None, *, for_write: bool = False) -> Path:
    """Resolve `path` (relative to `root`, or absolute) and refuse anything outside the root.

    Symlinks are followed before the check, so a link that points outside is refused too.
    Writes into `.git/` and every access to `.clover/` are refused.
    """
    root_r = Path(root).resolve()
    if path is None or str(path).strip() == "":
        return root_r
    text = str(path)
    if "\x00" in text:
        raise PathError("path contains a NUL byte")
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
    if for_write and rel.parts and rel.parts[0] == ".git":
        raise PathError(f"refused: {text!r} is inside .git/; tools never write git internals")
    return resolved


def _has_symlink_parent(root: Path, full: Path) -> bool:
    probe = full
    while probe != probe.parent:
        if probe.is_symlink():
            return True
        probe = probe.parent
    return False


def relpath(root: Path, path: Path) -> str:
    """The repository-relative POSIX form of an already resolved path."""
    rel = Path(path).resolve().relative_to(Path(root).resolve())
    return rel.as_posix() or "."
