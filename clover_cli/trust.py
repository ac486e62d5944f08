"""Which repositories the user trusts: a small JSON list in the user's config dir (docs/security.md).

A repository is untrusted content. Its own settings (`<root>/.clover/config.toml`) are read only
when the user has trusted that repository, with `clover trust [PATH]` or by answering the one-time
question the TUI asks. The decision, yes or no, is stored in

    $XDG_CONFIG_HOME/clover/trusted.json     (default ~/.config/clover/trusted.json)

keyed by the repository's real path (so a symlinked path and the real one agree, and a second
clone elsewhere is a different repository). Writes are atomic (a temporary file, fsync, rename)
under an advisory lock, so two processes never lose each other's decision. A corrupt or
unreadable list gives a clear warning and counts as empty (nothing is trusted); the next write
keeps the corrupt file beside it as `trusted.json.corrupt-<time>`, so nothing the user had is lost.

Only the standard library and tools/statedir.py (itself standard library only) are imported here,
so `clover --help` stays fast.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from clover_cli.tools.statedir import config_home  # the one place XDG_CONFIG_HOME is read

__all__ = ["TrustStore", "TrustDecision", "trust_path", "real_root", "config_home"]

FORMAT_VERSION = 1
MAX_TRUST_FILE_BYTES = 4 * 1024 * 1024


def trust_path() -> Path:
    """The trust list: `$XDG_CONFIG_HOME/clover/trusted.json`."""
    return config_home() / "trusted.json"


def real_root(root: Path | str) -> str:
    """The key of a repository: its real (symlink-free, absolute) path."""
    return os.path.realpath(os.path.expanduser(os.fspath(root)))


@dataclass(frozen=True)
class TrustDecision:
    """One stored decision."""

    path: str
    trusted: bool
    at: str  # ISO time of the decision (UTC)


class TrustStore:
    """The user's trust list. `warning` is set (one line) when the file on disk could not be used."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else trust_path()
        self.warning: str | None = None

    # -- reading -------------------------------------------------------------------------------

    def _load(self) -> dict[str, dict]:
        """The stored entries; {} (with self.warning set) when the file is missing or unusable."""
        self.warning = None
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_TRUST_FILE_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self.warning = (f"cannot read the trust list {self.path} ({exc.strerror or exc}); "
                            "treating every repository as untrusted")
            return {}
        why = None
        data: object = None
        if len(raw) > MAX_TRUST_FILE_BYTES:
            why = f"larger than {MAX_TRUST_FILE_BYTES // (1024 * 1024)} MB"
        else:
            try:
                data = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                why = f"not valid JSON: {str(exc).splitlines()[0][:80]}"
        if why is None and not (isinstance(data, dict) and isinstance(data.get("repos"), dict)):
            why = 'expected {"version": 1, "repos": {...}}'
        if why is not None:
            self.warning = (f"the trust list {self.path} is corrupt ({why}); treating every repository "
                            "as untrusted (`clover trust` rewrites it and keeps the old file beside it)")
            return {}
        entries = {}
        for key, value in data["repos"].items():
            if isinstance(key, str) and isinstance(value, dict) and isinstance(value.get("trusted"), bool):
                entries[key] = {"trusted": value["trusted"], "at": str(value.get("at", ""))}
        return entries

    def decision(self, root: Path | str) -> bool | None:
        """True (trusted), False (the user said no) or None (never asked) for the repository at root."""
        entry = self._load().get(real_root(root))
        return None if entry is None else entry["trusted"]

    def is_trusted(self, root: Path | str) -> bool:
        return self.decision(root) is True

    def entries(self) -> list[TrustDecision]:
        """Every stored decision, sorted by path."""
        return [TrustDecision(k, v["trusted"], v["at"]) for k, v in sorted(self._load().items())]

    # -- writing -------------------------------------------------------------------------------

    def set(self, root: Path | str, trusted: bool) -> str:
        """Store a decision for the repository at root; returns the key (its real path).
        Raises OSError (one line in str()) when the list cannot be written."""
        key = real_root(root)
        with self._locked():
            entries = self._load()
            if self.warning and self.path.exists():
                self._keep_corrupt()
            entries[key] = {"trusted": bool(trusted), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self._write(entries)
        return key

    def forget(self, root: Path | str) -> bool:
        """Remove the decision for root (the TUI will ask again); True when there was one."""
        key = real_root(root)
        with self._locked():
            entries = self._load()
            if key not in entries:
                return False
            if self.warning and self.path.exists():
                self._keep_corrupt()
            del entries[key]
            self._write(entries)
        return True

    def _keep_corrupt(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        with contextlib.suppress(OSError):
            os.replace(self.path, self.path.with_name(f"{self.path.name}.corrupt-{stamp}"))

    def _write(self, entries: dict[str, dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = json.dumps({"version": FORMAT_VERSION, "repos": entries}, indent=2, sort_keys=True) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=".trusted.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # make the rename itself durable
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An advisory lock beside the list, held for one read-modify-write."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX)
            except (ImportError, OSError):  # no flock here: the atomic rename still keeps the file whole
                pass
            yield
        finally:
            os.close(fd)
