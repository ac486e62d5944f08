"""A GGUF file converted once into a Hugging Face-shaped directory in Clover's cache (docs/engine.md,
"Loading").

transformers' GGUF path dequantizes every tensor and rebuilds the tokenizer from the file's
vocabulary at every load (25-75 s for SmolLM2-135M). `converted(path, label)` runs it once and keeps
the result, keyed by the file's sha256, in

    $XDG_CACHE_HOME/clover/gguf/<sha256[:32]>-v1/   config.json, generation_config.json,
                                                    model.safetensors (float32: the dequantized
                                                    values as transformers makes them), tokenizer.json,
                                                    tokenizer_config.json, chat_template.jinja,
                                                    COMPLETE.json (written last: each file's size)

so later loads read that directory like any checkpoint (engine/loader.py). The digest itself is
kept in `digests/`, keyed by (path, size, mtime_ns), so a start reads none of the GGUF.

An entry is built in a temporary folder beside it and renamed into place; while converting, a
process holds an advisory lock (fcntl) on `.lock-<entry>`, so a second process waits for the first
and then uses its result (without the lock, the rename still lets only one finished entry in). An
entry without its marker, or whose files' sizes differ from the marker's, is removed and rebuilt
with one notice line on stderr; a cache folder that cannot be written means converting in memory,
again with one notice. transformers and safetensors are imported only by the functions that
convert.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

from .load_common import ModelLoadError, one_line, quiet_transformers

FORMAT = 1  # bump when what an entry holds changes: older entries are then left unused
MARKER = "COMPLETE.json"
conversions = 0  # how many conversions this process ran (tests read it)


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/clover/gguf` (default `~/.cache/clover/gguf`); a relative
    XDG_CACHE_HOME is ignored, as the XDG spec says and tools/statedir.py does."""
    value = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(value) if value and os.path.isabs(value) else Path.home() / ".cache"
    return base / "clover" / "gguf"


def notice(label: str, text: str) -> None:
    """One line on stderr (stdout belongs to `--json`)."""
    print(f"clover: {label}: {text}", file=sys.stderr, flush=True)


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes, remembered under `digests/` by (path, size, mtime_ns)."""
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]
    record = cache_root() / "digests" / key
    with contextlib.suppress(OSError, UnicodeDecodeError):
        known = record.read_text().strip()
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return known
    with path.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    with contextlib.suppress(OSError):  # an unwritable cache only costs hashing again next time
        record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = record.with_name(f".{key}.{os.getpid()}.{secrets.token_hex(4)}")
        tmp.write_text(digest + "\n")
        os.replace(tmp, record)
    return digest


def entry_problem(entry: Path) -> str | None:
    """Why `entry` is not a finished conversion ("absent" when there is none), else None."""
    if not entry.exists():
        return "absent"
    try:
        sizes = json.loads((entry / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "it has no completion marker (an interrupted conversion?)"
    for name, size in sizes.items():
        try:
            actual = (entry / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, not {size}"
    return None


def discard(entry: Path, label: str, why: str) -> None:
    """Remove a broken entry (renamed aside first, so no reader meets it half-deleted)."""
    notice(label, f"the converted copy in {entry} is unusable ({why}); converting again")
    aside = entry.with_name(f".trash-{entry.name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.rename(entry, aside)
    except FileNotFoundError:  # another process removed it already
        return
    except OSError:
        aside = entry
    shutil.rmtree(aside, ignore_errors=True)


def converted(path: Path, label: str) -> Path | tuple[Any, Any]:
    """The cached directory for the GGUF at `path`, converting it first when needed; or, when the
    cache cannot be written, the `(model, tokenizer)` transformers built in memory (float32)."""
    entry = cache_root() / f"{file_digest(path)[:32]}-v{FORMAT}"
    if entry_problem(entry) is None:
        return entry
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        notice(label, f"cannot keep a converted copy in {entry.parent} ({_why(exc)}); "
                      "converting in memory (this start only)")
        return convert(path, label)
    with _locked(entry, label) as exclusive:
        problem = entry_problem(entry)
        if problem is None:  # another process finished it while we waited
            return entry
        if problem != "absent":
            discard(entry, label, problem)
        if exclusive:  # leftovers of a killed conversion (a live one would hold the lock)
            for old in entry.parent.glob(f".tmp-{entry.name}-*"):
                shutil.rmtree(old, ignore_errors=True)
        notice(label, f"converting {path.name} once (later starts load the result from {entry})")
        model, tokenizer = convert(path, label)
        try:
            _publish(model, tokenizer, entry)
        except OSError as exc:
            notice(label, f"cannot keep the converted copy in {entry.parent} ({_why(exc)}); "
                          "using it from memory (this start only)")
            return model, tokenizer
    return entry


def convert(path: Path, label: str) -> tuple[Any, Any]:
    """transformers' GGUF load: the model dequantized to float32, and the tokenizer."""
    global conversions
    from transformers import AutoModelForCausalLM, AutoTokenizer

    conversions += 1
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                                      local_files_only=True, trust_remote_code=False)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                         dtype="float32", local_files_only=True,
                                                         trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds here
        raise ModelLoadError(f"{label}: cannot load GGUF {path.name}: {one_line(exc)}") from None
    return model.eval(), tokenizer


def _why(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


@contextlib.contextmanager
def _locked(entry: Path, label: str) -> Iterator[bool]:
    """Hold `.lock-<entry>` exclusively (True), waiting with a notice when another process has it;
    False where no lock can be taken (no fcntl, a lock file that cannot be opened)."""
    try:
        import fcntl

        fd = os.open(entry.with_name(f".lock-{entry.name}"), os.O_RDWR | os.O_CREAT, 0o600)
    except (ImportError, OSError):
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            notice(label, "another Clover process is converting it; waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # releases the lock


def _publish(model: Any, tokenizer: Any, entry: Path) -> None:
    """Write the directory under a temporary name, the marker last, then rename it into place."""
    tmp = entry.with_name(f".tmp-{entry.name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        tmp.mkdir(mode=0o700)
        _write_hf_dir(model, tokenizer, tmp)
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        (tmp / MARKER).write_text(json.dumps({"format": FORMAT, "files": files}, indent=1))
        try:
            os.rename(tmp, entry)
        except OSError:
            if entry_problem(entry) is not None:  # not another process's finished entry
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_hf_dir(model: Any, tokenizer: Any, out: Path) -> None:
    """config.json, generation_config.json, model.safetensors and the tokenizer files."""
    from safetensors.torch import save_file

    config = model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "dtype", "torch_dtype"):
        config.pop(key, None)
    config["architectures"] = [type(model).__name__]
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    model.generation_config.save_pretrained(str(out))
    tied = bool(config.get("tie_word_embeddings"))
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()
             if not (tied and k == "lm_head.weight")}  # a tied head is the embedding, stored once
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(str(out))
