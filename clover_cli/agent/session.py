"""Session trajectories: JSONL files, one record per line, in the user's state folder for the
repository (`repo_state_dir(root, "sessions")`, tools/statedir.py) — never inside the repository,
so a cloned repository cannot ship a session that `--continue` would resume (docs/agent.md).

Records: {"type": "meta", ...} first; {"type": "message", "message": {...}} for every message added
to the conversation; {"type": "reset", "messages": [...]} when the conversation was rewritten
(compaction, clear); other types ("tool_call", "tool_result", "turn_end", ...) are the trajectory
for people and tools to read and are ignored when a session is resumed.

Reading is forgiving: a line that is not JSON, not an object, not valid UTF-8, or a record of a
known type without its fields (an `original` without a path) is skipped and reported in one line;
lone surrogates read back from `\\ud800` escapes become U+FFFD. Only regular files are read, never
more than MAX_SESSION_BYTES, with a non-blocking open (a FIFO named like a session cannot hang).
Writing never fails on text (a record whose text cannot be UTF-8 is written as ASCII JSON escapes)
and never ends a run: a write that fails (a full disk) is undone to the last whole line, one
warning says the session is no longer saved, and the run goes on. A sessions folder that cannot
exist (the state folder is a file) is a SessionError when the log is opened.
"""
from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from clover_cli.agent.redact import scrub
from clover_cli.tools.statedir import repo_state_dir, state_folder_problem
from clover_cli.tools.textio import FileTooLargeError, NotRegularFileError, file_kind, read_regular

_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_SESSION_BYTES = 256 * 1024 * 1024
# the fields a record of a known type must have to be used when a session is resumed
_SHAPES = {"original": {"path": str}, "message": {"message": dict}, "reset": {"messages": list}}
MAX_RESTORED = 10_000  # messages a resumed conversation keeps at most (the latest; no window holds more)
ROLES = ("system", "user", "assistant", "tool")


class SessionError(ValueError):
    """A session that cannot be found or read; the message is one line for the user."""


def sessions_dir(root: Path) -> Path:
    """The folder of this repository's sessions (not created here)."""
    return repo_state_dir(root, "sessions", create=False)


def new_session_id() -> str:
    """Sortable and unique: 20261130-201512-3fa9c1."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _regular_sessions(folder: Path) -> list[tuple[float, str, Path]]:
    """(mtime, name, path) of the regular `*.jsonl` files in `folder`; a folder, FIFO or dangling
    link that has a session's name is no session (reading it would fail or block)."""
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("."):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((st.st_mtime, entry.name, Path(entry.path)))
    return sorted(found)


def find_session(root: Path, which: str) -> Path:
    """The file of session `which` ("last" = the most recently written regular session file)."""
    folder = sessions_dir(root)
    if which == "last":
        files = _regular_sessions(folder)
        if not files:
            raise SessionError(f"no session to continue in {folder}")
        return files[-1][2]
    if not which or len(which) > 200 or any(c in which for c in "/\\\x00") or which.startswith("."):
        raise SessionError(f"bad session id {which!r}")
    path = folder / f"{which}.jsonl"
    try:
        mode = path.lstat().st_mode
    except OSError:
        raise SessionError(f"no session {which!r} in {folder}") from None
    if not stat.S_ISREG(mode):
        raise SessionError(f"session {which!r} cannot be read: {path} is {file_kind(mode)}, "
                           "not a session file")
    return path


class SessionLog:
    """Appends records to one session file (each line flushed, so a crash loses nothing written)."""

    def __init__(self, root: Path, session_id: str, enabled: bool = True,
                 warn=None) -> None:
        self.root = Path(root)
        self.session_id = session_id
        self.path = sessions_dir(root) / f"{session_id}.jsonl"
        self.enabled = enabled
        self.failed: str | None = None  # why writing stopped, once it has
        self._warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._checked_tail = False
        self._held: list[dict[str, Any]] | None = None  # records kept back until the first turn
        if enabled:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                problem = state_folder_problem(self.path.parent) or exc.strerror or str(exc)
                raise SessionError(f"cannot keep sessions in {self.path.parent}: {problem}") from None

    def hold(self) -> None:
        """Keep records back until the first `turn_start`: a session in which nothing was sent
        leaves no file (docs/agent.md, "Sessions")."""
        if self._held is None:
            self._held = []

    @property
    def written(self) -> bool:
        """False while records are held back (nothing sent yet)."""
        return self._held is None

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line. A failed write (a full disk, the file replaced by a
        folder or FIFO) leaves the file as it was, warns once and stops the log; never raises."""
        if not self.enabled or self.failed is not None:
            return
        if self._held is not None:
            if record.get("type") != "turn_start":
                self._held.append({"t": round(time.time(), 3), **record})
                return
            held, self._held = self._held, None
            for earlier in held:
                self.append(earlier)
        full = {"t": round(time.time(), 3), **record}
        try:
            line = scrub(json.dumps(full, ensure_ascii=False, default=str))  # no API key (redact.py)
        except (ValueError, RecursionError) as exc:  # circular or absurdly deep: note, never crash
            line = json.dumps({"t": full["t"], "type": str(record.get("type", "record"))[:64],
                               "unwritable": f"{type(exc).__name__}: {exc}"[:200]})
        try:
            data = (line + "\n").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: ASCII escapes keep the record lossless
            data = (scrub(json.dumps(full, ensure_ascii=True, default=str)) + "\n").encode("utf-8")
        try:
            self._write(data, sync=record.get("type") == "turn_end")
        except OSError as exc:
            self.failed = exc.strerror or str(exc)
            self._warn(f"clover: warning: session {self.session_id} is not saved from here on "
                       f"(what it holds is kept): {self.path}: {self.failed}")

    def _write(self, data: bytes, sync: bool) -> None:
        flags = (os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
                 | getattr(os, "O_CLOEXEC", 0))
        fd = os.open(self.path, flags, 0o600)  # a FIFO without a reader: ENXIO, never a hang
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, f"it is {file_kind(st.st_mode)}, not a session file")
            size = st.st_size
            if not self._checked_tail:  # a line torn by an earlier crash must not swallow this one
                self._checked_tail = True
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data
            try:
                done = 0
                while done < len(data):
                    done += os.write(fd, data[done:])
                if sync:
                    os.fsync(fd)
            except OSError:
                try:  # no torn line left behind: the file ends with its last whole record
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)


def _clean(value: Any) -> Any:
    """`value` with lone surrogates in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def _well_formed(rec: dict[str, Any]) -> bool:
    """A record of a known type has its fields with their types (an `original` its path)."""
    kind = rec.get("type")
    if not isinstance(kind, str):
        return "type" not in rec
    if kind == "original" and not isinstance(rec.get("content"), (str, type(None))):
        return False
    return all(isinstance(rec.get(k), t) for k, t in _SHAPES.get(kind, {}).items())


def read_records(path: Path, kind: str | None = None,
                 problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The records of a session file (of one `kind`, if given). Lines that are torn, not JSON
    objects or not UTF-8 are skipped; one summary line goes to `problems` when given."""
    try:
        raw = read_regular(path, MAX_SESSION_BYTES)
    except (NotRegularFileError, FileTooLargeError) as e:
        raise SessionError(f"cannot read session {Path(path).stem}: {e}") from None
    except OSError as e:
        raise SessionError(f"cannot read session {path}: {e.strerror or e}") from None
    bad: list[int] = []
    for n, chunk in enumerate(raw.split(b"\n"), 1):
        if not chunk.strip():
            continue
        try:
            rec = json.loads(chunk.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            bad.append(n)
            continue
        if not isinstance(rec, dict) or not _well_formed(rec):
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
            messages = list(rec["messages"][-MAX_RESTORED:])
        elif kind == "turn_start":
            turns += 1
    messages, dropped = valid_messages(messages[-MAX_RESTORED:])
    if dropped:
        found.append(f"session {Path(path).stem}: skipped {dropped} message{'s' if dropped != 1 else ''} "
                     "it could not understand (a role, content or tool call of the wrong shape)")
    if problems is not None:
        problems.extend(found)
    else:
        for line in found:
            print(f"clover: {line}", file=sys.stderr)
    return meta, messages, turns


def valid_messages(messages: list) -> tuple[list[dict[str, Any]], int]:
    """(the messages a conversation can use, how many were dropped). A message needs a known
    role and text content (None is empty; a list of text parts is joined); an assistant's
    `tool_calls` must be a list of calls with an id and a function name; a tool result must
    answer a call kept before it. Whatever a hand edit broke is dropped, the rest kept."""
    kept: list[dict[str, Any]] = []
    calls: set[str] = set()
    for message in messages:
        fixed = _valid_message(message, calls)
        if fixed is not None:
            kept.append(fixed)
            calls.update(c["id"] for c in fixed.get("tool_calls", ()))
    while kept and kept[0].get("role") == "tool":  # a cut left results without their call
        kept.pop(0)
    return kept, len(messages) - len(kept)


def _valid_message(message: Any, calls: set[str]) -> dict[str, Any] | None:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return None
    content = message.get("content")
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
        content = "".join(p["text"] for p in content)
    if content is None:
        content = ""
    if not isinstance(content, str):
        return None
    fixed = {**message, "content": content}
    if message["role"] == "tool" and not (isinstance(message.get("tool_call_id"), str)
                                          and message["tool_call_id"] in calls):
        return None
    if "tool_calls" in message:
        if message["role"] != "assistant" or not isinstance(message["tool_calls"], list):
            return None
        if not all(_valid_call(c) for c in message["tool_calls"]):
            return None
        if not message["tool_calls"]:
            del fixed["tool_calls"]
    return fixed


def _valid_call(call: Any) -> bool:
    """A stored tool call: {"id": str, "function": {"name": str, "arguments": str or dict}}."""
    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
        return False
    fn = call.get("function")
    return (isinstance(fn, dict) and isinstance(fn.get("name"), str) and bool(fn["name"])
            and isinstance(fn.get("arguments", ""), (str, dict)))
