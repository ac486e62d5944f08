"""Session trajectories: JSONL files, one record per line, in the user's state folder for the
repository (`repo_state_dir(root, "sessions")`, tools/statedir.py) — never inside the repository,
so a cloned repository cannot ship a session that `--continue` would resume (docs/agent.md).

Records: {"type": "meta", ...} first; {"type": "message", "message": {...}} for every message added
to the conversation; {"type": "reset", "messages": [...]} when the conversation was rewritten
(compaction, clear); other types ("tool_call", "tool_result", "turn_end", ...) are the trajectory
for people and tools to read and are ignored when a session is resumed.

Reading is forgiving: a line that is not JSON, not an object, or not valid UTF-8 is skipped and
reported in one line; lone surrogates read back from `\\ud800` escapes become U+FFFD. Writing
never fails on text: a record whose text cannot be UTF-8 is written as ASCII JSON escapes.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from clover_cli.tools.statedir import repo_state_dir

_SURROGATE = re.compile("[\ud800-\udfff]")


class SessionError(ValueError):
    """A session that cannot be found or read; the message is one line for the user."""


def sessions_dir(root: Path) -> Path:
    """The folder of this repository's sessions (not created here)."""
    return repo_state_dir(root, "sessions", create=False)


def new_session_id() -> str:
    """Sortable and unique: 20261130-201512-3fa9c1."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def find_session(root: Path, which: str) -> Path:
    """The file of session `which` ("last" = most recently written)."""
    folder = sessions_dir(root)
    if which == "last":
        files = sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name)) if folder.is_dir() else []
        if not files:
            raise SessionError(f"no session to continue in {folder}")
        return files[-1]
    if not which or len(which) > 200 or any(c in which for c in "/\\\x00") or which.startswith("."):
        raise SessionError(f"bad session id {which!r}")
    path = folder / f"{which}.jsonl"
    if not path.is_file():
        raise SessionError(f"no session {which!r} in {folder}")
    return path


class SessionLog:
    """Appends records to one session file (each line flushed, so a crash loses nothing written)."""

    def __init__(self, root: Path, session_id: str, enabled: bool = True) -> None:
        self.root = Path(root)
        self.session_id = session_id
        self.path = sessions_dir(root) / f"{session_id}.jsonl"
        self.enabled = enabled
        self._checked_tail = False

    def append(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        full = {"t": round(time.time(), 3), **record}
        try:
            line = json.dumps(full, ensure_ascii=False, default=str)
        except (ValueError, RecursionError) as exc:  # circular or absurdly deep: note, never crash
            line = json.dumps({"t": full["t"], "type": str(record.get("type", "record"))[:64],
                               "unwritable": f"{type(exc).__name__}: {exc}"[:200]})
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: ASCII escapes keep the record lossless
            line = json.dumps(full, ensure_ascii=True, default=str)
        if not self._checked_tail:  # a line torn by an earlier crash must not swallow this one
            self._checked_tail = True
            if self.path.is_file() and self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        line = "\n" + line
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            if record.get("type") == "turn_end":
                os.fsync(f.fileno())


def _clean(value: Any) -> Any:
    """`value` with lone surrogates in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def read_records(path: Path, kind: str | None = None,
                 problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The records of a session file (of one `kind`, if given). Lines that are torn, not JSON
    objects or not UTF-8 are skipped; one summary line goes to `problems` when given."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise SessionError(f"cannot read session {path}: {e.strerror}") from e
    bad: list[int] = []
    for n, chunk in enumerate(raw.split(b"\n"), 1):
        if not chunk.strip():
            continue
        try:
            rec = json.loads(chunk.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            bad.append(n)
            continue
        if not isinstance(rec, dict):
            bad.append(n)
            continue
        if kind is None or rec.get("type") == kind:
            yield _clean(rec)
    if bad and problems is not None:
        problems.append(f"session {Path(path).stem}: skipped {len(bad)} unreadable line"
                        f"{'s' if len(bad) != 1 else ''} (first: line {bad[0]})")


def load_messages(path: Path, problems: list[str] | None = None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(meta, conversation messages, turns) reconstructed from a session file. Unreadable lines
    are skipped; their one-line report goes to `problems`, or to stderr when none is given."""
    meta: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    turns = 0
    found: list[str] = []
    for rec in read_records(path, problems=found):
        kind = rec.get("type")
        if kind == "meta":
            meta = rec
        elif kind == "message" and isinstance(rec.get("message"), dict):
            messages.append(rec["message"])
        elif kind == "reset" and isinstance(rec.get("messages"), list):
            messages = [m for m in rec["messages"] if isinstance(m, dict)]
        elif kind == "turn_start":
            turns += 1
    if problems is not None:
        problems.extend(found)
    else:
        for line in found:
            print(f"clover: {line}", file=sys.stderr)
    return meta, messages, turns
