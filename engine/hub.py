"""`hf:ORG/NAME`: the local Hugging Face cache first, else a download (docs/engine.md, "Model specs").

The download (`download`, used by `resolve` and `clover models pull`) takes configs, safetensors
weights and tokenizer files only (never pickled `*.bin` weights, never Python files, never GGUF),
writes them into the ordinary Hugging Face cache layout (`models--ORG--NAME/blobs`, `snapshots/`,
`refs/main`), shows its progress on stderr and resumes after a kill: a file that was cut off stays
as `blobs/<etag>.incomplete` and the next run asks the server for the rest (an HTTP Range request),
then checks the whole file's SHA-256 against the Hub's LFS hash. Metadata comes from
huggingface_hub (`model_info`, `list_repo_tree`, `get_hf_file_metadata`, the same endpoints and
token as its own `snapshot_download`); the file bodies are fetched here, because
huggingface_hub 2.x discards a partial file when its process ends. A missing, private or gated
repository, or an unreachable Hub, is one line (HubError). `HF_HUB_OFFLINE=1` or `--offline`
turns downloads off. Everything else the loader asks of transformers is local.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from .hub_progress import Progress


def env_offline() -> bool:
    """Has the user turned the hub off (HF_HUB_OFFLINE, or transformers' older name)?"""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


# what a checkpoint directory needs: configs, safetensors weights, tokenizer files, templates
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
IGNORE_PATTERNS = ["*.py", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.msgpack", "*.h5", "*.gguf",
                   "*.onnx", "*.pb"]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20


class HubError(RuntimeError):
    """A repo that is not cached and cannot be fetched; the message is one line."""


def hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def repo_dir(repo: str) -> Path:
    """The cache folder of `ORG/NAME` (it need not exist)."""
    return hf_cache_dir() / ("models--" + repo.replace("/", "--"))


def cached_snapshot(repo: str) -> Path | None:
    """The cached snapshot of `ORG/NAME` (refs/main, else the newest), or None."""
    snapshots = repo_dir(repo) / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = snapshots.parent / "refs" / "main"
    if ref.is_file():
        snap = snapshots / ref.read_text().strip()
        if snap.is_dir():
            return snap
    candidates = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return candidates[-1] if candidates else None


def snapshot_complete(snap: Path | None) -> bool:
    """A snapshot holds config.json and its weights: every shard its index names, else at least
    one `*.safetensors` (a download writes each weight file only once it is whole)."""
    if snap is None or not (snap / "config.json").is_file():
        return False
    index = snap / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        return bool(shards) and all((snap / s).is_file() for s in shards)
    return any(snap.glob("*.safetensors"))


def cache_state(repo: str) -> str | None:
    """"yes" (a whole checkpoint is cached), "partial" (a download was cut off) or None."""
    snap = cached_snapshot(repo)
    if snapshot_complete(snap):
        return "yes"
    return "partial" if snap is not None or (repo_dir(repo) / "blobs").is_dir() else None


def resolve(repo: str, *, offline: bool = False, before_weights=None) -> Path:
    """The local directory of `hf:ORG/NAME`, downloading it when it is not cached (or was cut off)
    and downloads are allowed; raises HubError (one line). before_weights: see `download`."""
    snap = cached_snapshot(repo)
    if snapshot_complete(snap):
        return snap
    if offline or env_offline():
        why = "--offline" if offline else "HF_HUB_OFFLINE=1"
        state = "only partly" if snap is not None else "not"
        raise HubError(f"hf:{repo} is {state} in the local Hugging Face cache ({hf_cache_dir()}) and "
                       f"downloads are off ({why})")
    return download(repo, before_weights=before_weights)


def wanted(path: str) -> bool:
    """Is this repository file part of what Clover downloads? Weights only at the top level."""
    if any(fnmatch.fnmatch(path, p) for p in IGNORE_PATTERNS):
        return False
    if path.endswith(".safetensors") and "/" in path:
        return False  # sub-folders hold other formats or other models (onnx/, original/, ...)
    return any(fnmatch.fnmatch(path, p) for p in ALLOW_PATTERNS)


def download(repo: str, *, revision: str = "main", before_weights=None) -> Path:
    """Fetch the safetensors release of `ORG/NAME` into the cache, resuming any file a killed run
    left behind; progress on stderr. Raises HubError (one line). `before_weights(snapshot, bytes)`
    is called once the configs and tokenizer files are in and before any weight file is fetched,
    with the listed bytes of the safetensors files: it may raise HubError to stop there (the
    loader's fit check: a model that cannot fit is not downloaded)."""
    from huggingface_hub import constants

    try:
        sha, files = _listing(repo, revision)
        names = sorted((f for f in files if wanted(f.path)), key=lambda f: (f.size or 0, f.path))
        if not any(f.path.endswith(".safetensors") for f in names):
            raise HubError(f"hf:{repo} has no *.safetensors weights (pickled weights are never loaded)")
        _access(repo, sha, names[0].path)  # a gated repository lists its files, then refuses them
        total = sum(f.size or 0 for f in names)
        print(f"clover: downloading hf:{repo} (commit {sha[:12]}) from {constants.ENDPOINT} into "
              f"{hf_cache_dir()}: {len(names)} files, {_size(total)} (safetensors, configs and tokenizer "
              "files only)", file=sys.stderr)
        names.sort(key=lambda f: f.path.endswith(".safetensors"))  # stable: small files first
        weights = sum(f.size or 0 for f in names if f.path.endswith(".safetensors"))
        for i, f in enumerate(names):
            if before_weights is not None and f.path.endswith(".safetensors") and (
                    i == 0 or not names[i - 1].path.endswith(".safetensors")):
                before_weights(repo_dir(repo) / "snapshots" / sha, weights)
            _fetch(repo, sha, f.path, getattr(f.lfs, "sha256", None))
    except HubError:
        raise
    except Exception as exc:  # noqa: BLE001 - network, auth and missing-repo errors: one line each
        raise HubError(_explain(repo, exc)) from None
    refs = repo_dir(repo) / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / revision).write_text(sha)
    snap = repo_dir(repo) / "snapshots" / sha
    if not snapshot_complete(snap):
        raise HubError(f"hf:{repo}: the download finished without config.json or all its weight shards")
    print(f"clover: hf:{repo} is ready: {snap}", file=sys.stderr)
    return snap


def _listing(repo: str, revision: str):
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi()
    sha = api.model_info(repo, revision=revision).sha
    if not sha:
        raise HubError(f"hf:{repo}: the Hub gave no commit for revision {revision!r}")
    files = [f for f in api.list_repo_tree(repo, revision=sha, recursive=True) if isinstance(f, RepoFile)]
    return sha, files


def _access(repo: str, sha: str, path: str) -> None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    get_hf_file_metadata(hf_hub_url(repo, path, revision=sha))


def _link(blob: Path, pointer: Path) -> None:
    pointer.parent.mkdir(parents=True, exist_ok=True)
    try:
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    except OSError:  # no symlinks here (some filesystems): a copy
        import shutil

        shutil.copyfile(blob, pointer)


def _fetch(repo: str, sha: str, path: str, lfs_sha256: str | None) -> None:
    """One file: skip it when cached, else download (or finish) its blob and link it."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    pointer = repo_dir(repo) / "snapshots" / sha / path
    if pointer.exists():
        return
    meta = get_hf_file_metadata(hf_hub_url(repo, path, revision=sha))
    etag = meta.etag or lfs_sha256 or sha + "-" + path.replace("/", "_")
    blob = repo_dir(repo) / "blobs" / etag
    blob.parent.mkdir(parents=True, exist_ok=True)
    lock = hf_cache_dir() / ".locks" / repo_dir(repo).name / f"{etag}.lock"  # huggingface_hub's own
    lock.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(lock)):  # another download of this blob (ours or huggingface_hub's) waits
        if not blob.is_file():
            _get(meta.location, blob, meta.size, path, lfs_sha256 or (etag if _SHA256.match(etag) else None))
    _link(blob, pointer)


def _headers(url: str) -> dict:
    from urllib.parse import urlparse

    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers()
    if urlparse(url).netloc != urlparse(constants.ENDPOINT).netloc:
        headers.pop("authorization", None)  # a signed CDN address takes no token
    return headers


def _get(url: str, blob: Path, size: int | None, name: str, sha256: str | None) -> None:
    """Stream `url` into `blob`, continuing `blob.incomplete` with a Range request; the result is
    moved into place only once its size (and, after a resume, its SHA-256) is right."""
    from huggingface_hub import constants, get_session
    from huggingface_hub.utils import hf_raise_for_status

    part = blob.with_name(blob.name + ".incomplete")
    have = part.stat().st_size if part.is_file() else 0
    if size is not None and have > size:
        have = 0
    headers = _headers(url)
    if have:
        headers["Range"] = f"bytes={have}-"
    with get_session().stream("GET", url, headers=headers, follow_redirects=True,
                              timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT) as response:
        if response.status_code == 416:  # what we hold is already the whole file
            response.read()
        else:
            hf_raise_for_status(response)
            if have and response.status_code != 206:  # the server ignored the Range: start over
                have = 0
            _write(response, part, have, size, name)
    got = part.stat().st_size
    if size is not None and got != size:
        raise HubError(f"{name}: got {got} of {size} bytes; run the same command again to resume")
    if have and sha256 and _file_sha256(part) != sha256:
        part.unlink()
        raise HubError(f"{name}: the resumed file does not match the Hub's SHA-256 (removed); run the "
                       "same command again")
    os.replace(part, blob)


def _write(response, part: Path, have: int, size: int | None, name: str) -> None:
    progress = Progress(name, size, have)
    with open(part, "ab" if have else "wb") as fh:
        for chunk in response.iter_bytes():
            if chunk:
                fh.write(chunk)
                fh.flush()
                progress.update(len(chunk))
    progress.close()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK * 8), b""):
            digest.update(block)
    return digest.hexdigest()


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def _explain(repo: str, exc: BaseException) -> str:
    """One line for a failed download."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    login = "log in with `hf auth login` or set HF_TOKEN"
    if isinstance(exc, GatedRepoError):
        return f"hf:{repo} is gated: accept its terms on its Hub page, then {login}"
    if isinstance(exc, RepositoryNotFoundError):
        return f"hf:{repo}: no such model on the Hub ({constants.ENDPOINT}), or it is private ({login})"
    if isinstance(exc, RevisionNotFoundError):
        return f"hf:{repo}: no such revision on the Hub"
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        if status in (401, 403):
            return f"hf:{repo}: not authorised (HTTP {status}): {login}"
        return f"hf:{repo}: the Hub answered HTTP {status}; run the same command again to resume"
    if isinstance(exc, OSError) and not type(exc).__module__.startswith(("httpx", "httpcore")):
        return f"hf:{repo}: cannot write the download ({exc.strerror or exc.__class__.__name__}: {exc.filename or ''})"
    text = " ".join(str(exc).split())[:160]
    return (f"hf:{repo}: cannot reach {constants.ENDPOINT} ({exc.__class__.__name__}"
            + (f": {text}" if text else "") + "); run the same command again to resume")
