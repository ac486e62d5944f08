"""Session trajectories: JSONL files under <root>/.clover/sessions/, one record per line.

Records: {"type": "meta", ...} first; {"type": "message", "message": {...}} for every message added
to the conversation; {"type": "reset", "messages": [...]} when the conversation was rewritten
(compaction, clear); other types ("tool_call", "tool_result", "turn_end", ...) are the trajectory
for people and tools to read and are ignored when a session is resumed.
"""
from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from clover_cli.tools.checkpoints import ensure_private_dir


class SessionError(ValueError):
    """A session that cannot be found or read; the message is one line for the user."""


def sessions_dir(root: Path) -> Path:
    return Path(root) / ".clover" / "sessions"


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
    if not which or "/" in which or which.startswith("."):
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
            ensure_private_dir(self.root)  # .clover/ gets its .gitignore before anything lands in it
            self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"t": round(time.time(), 3), **record}, ensure_ascii=False, default=str)
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


def load_messages(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(meta, conversation messages, turns) reconstructed from a session file."""
    meta: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    turns = 0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise SessionError(f"cannot read session {path}: {e.strerror}") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash: the records around it still count
        kind = rec.get("type")
        if kind == "meta":
            meta = rec
        elif kind == "message" and isinstance(rec.get("message"), dict):
            messages.append(rec["message"])
        elif kind == "reset" and isinstance(rec.get("messages"), list):
            messages = [m for m in rec["messages"] if isinstance(m, dict)]
        elif kind == "turn_start":
            turns += 1
    return meta, messages, turns
