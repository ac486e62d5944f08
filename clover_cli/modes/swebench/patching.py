"""Applying a model patch the way the SWE-bench harness does, and resetting the test files.

The harness tries, in order, `git apply --verbose`, `git apply --verbose --reject` and
`patch --batch --fuzz=5 -p1 -i`, and takes the first that exits 0 (each on the tree the one
before left, as it does). Before the test_patch goes in, every file the test_patch touches is
checked out at the base commit, so an agent's own edits to those files cannot block it; a file
the test_patch creates is removed first (the checkout cannot restore what the base lacks).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from clover_cli.modes.swebench.specs import patch_files
from clover_cli.modes.worktree import git

APPLY_METHODS = ("git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i")


def _run_patch_tool(tree: Path, patch_file: Path) -> subprocess.CompletedProcess | None:
    exe = shutil.which("patch")
    if exe is None:
        return None
    return subprocess.run([exe, "--batch", "--fuzz=5", "-p1", "-i", str(patch_file)], cwd=str(tree),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def apply_model_patch(tree: Path, patch: str) -> tuple[str | None, str]:
    """(method that applied it or None, the last tool's message)."""
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False, encoding="utf-8") as fh:
        fh.write(patch if patch.endswith("\n") else patch + "\n")
        patch_file = Path(fh.name)
    message = ""
    try:
        for method in APPLY_METHODS:
            if method.startswith("git"):
                proc = git(tree, *method.split()[1:], str(patch_file), check=False)
            else:
                proc = _run_patch_tool(tree, patch_file)
                if proc is None:
                    message = "`patch` is not installed"
                    continue
            if proc.returncode == 0:
                return method, (proc.stdout or proc.stderr).strip()
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            message = lines[-1] if lines else f"exit {proc.returncode}"
        return None, message
    finally:
        patch_file.unlink(missing_ok=True)


def reset_test_files(tree: Path, base_commit: str, test_patch: str) -> list[str]:
    """Check out the test_patch's files at base_commit (remove those the base lacks)."""
    reset: list[str] = []
    for rel in patch_files(test_patch):
        exists = git(tree, "cat-file", "-e", f"{base_commit}:{rel}", check=False).returncode == 0
        if exists:
            git(tree, "checkout", base_commit, "--", rel)
        else:
            target = Path(tree) / rel
            if target.is_file() or target.is_symlink():
                target.unlink()
            else:
                continue
        reset.append(rel)
    return reset


def apply_test_patch(tree: Path, test_patch: str) -> tuple[bool, str]:
    """`git apply --verbose` the test_patch; (ok, message)."""
    if not test_patch.strip():
        return True, "no test_patch"
    proc = git(tree, "apply", "--verbose", "-", input_text=test_patch if test_patch.endswith("\n")
               else test_patch + "\n", check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, f"test_patch did not apply: {lines[-1] if lines else proc.returncode}"
    return True, "test_patch applied"
