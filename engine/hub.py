"""`hf:ORG/NAME`: the local Hugging Face cache first, else a download (docs/engine.md, "Model specs").

The download takes safetensors weights, configs and tokenizer files only (never pickled `*.bin`
weights, never Python files), shows huggingface_hub's progress bars on stderr, and resumes an
interrupted download (huggingface_hub keeps partial files in the cache). It is skipped, with one
line, when the user turns downloads off: `HF_HUB_OFFLINE=1` in the environment or `--offline`.
Everything else the loader asks of transformers is local (`local_files_only=True`).
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path



def env_offline() -> bool:
    """Has the user turned the hub off (HF_HUB_OFFLINE, or transformers' older name)?"""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


# what a checkpoint directory needs: configs, safetensors weights, tokenizer files, templates
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
IGNORE_PATTERNS = ["*.py", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.msgpack", "*.h5", "*.gguf"]


class HubError(RuntimeError):
    """A repo that is not cached and cannot be fetched; the message is one line."""


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def cached_snapshot(repo: str) -> Path | None:
    """The cached snapshot of `ORG/NAME` (refs/main, else the newest), or None."""
    snapshots = hf_cache_dir() / ("models--" + repo.replace("/", "--")) / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = snapshots.parent / "refs" / "main"
    if ref.is_file():
        snap = snapshots / ref.read_text().strip()
        if snap.is_dir():
            return snap
    candidates = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return candidates[-1] if candidates else None


def resolve(repo: str, *, offline: bool = False) -> Path:
    """The local directory of `hf:ORG/NAME`, downloading it when it is not cached and downloads
    are allowed; raises HubError (one line)."""
    snap = cached_snapshot(repo)
    if snap is not None and any(snap.glob("*.safetensors")):
        return snap
    if offline or env_offline():
        why = "--offline" if offline else "HF_HUB_OFFLINE=1"
        raise HubError(f"hf:{repo} is not in the local Hugging Face cache ({hf_cache_dir()}) and "
                       f"downloads are off ({why})")
    return download(repo)


def download(repo: str) -> Path:
    """Fetch the safetensors release of `ORG/NAME` into the cache (progress on stderr)."""
    import huggingface_hub

    print(f"clover: downloading hf:{repo} into {hf_cache_dir()} (safetensors only)", file=sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            path = huggingface_hub.snapshot_download(
                repo_id=repo, cache_dir=str(hf_cache_dir()), allow_patterns=ALLOW_PATTERNS,
                ignore_patterns=IGNORE_PATTERNS)
    except Exception as exc:  # noqa: BLE001 - network, auth and missing-repo errors alike
        text = " ".join(str(exc).split())[:200] or exc.__class__.__name__
        raise HubError(f"hf:{repo}: download failed: {text}") from None
    path = Path(path)
    if not any(path.glob("*.safetensors")):
        raise HubError(f"hf:{repo} has no *.safetensors weights (pickled weights are never loaded)")
    return path
