"""run_shell: a command in the repository root, in its own process group, with no stdin.

On timeout or cancellation the whole group is killed (children too); when the command exits,
whatever it left running in its group is killed as well, so background processes never
outlive the call. Output is capped to a head and a tail with the elided amount reported; the
exit code is part of the result.
"""
from __future__ import annotations

import codecs
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from .base import ToolResult

DEFAULT_TIMEOUT = 120.0
HEAD_CHARS = 8000
TAIL_CHARS = 8000
GRACE_AFTER_EXIT = 0.5  # seconds a finished command's background children may keep the pipe
POLL_SECONDS = 0.05     # how often a running command checks its cancel event


class CappedOutput:
    """Keep the first HEAD and last TAIL characters of a stream and count what falls between."""

    def __init__(self, head: int = HEAD_CHARS, tail: int = TAIL_CHARS):
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail = [], []
        self.head_len = self.tail_len = 0
        self.elided_chars = self.elided_lines = 0

    def add(self, text: str) -> None:
        room = self.head_limit - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(text[:room])
            text = text[room:]
        if not text:
            return
        self.tail.append(text)
        self.tail_len += len(text)
        while self.tail_len - len(self.tail[0]) >= self.tail_limit:
            dropped = self.tail.pop(0)
            self._elide(dropped)
        excess = self.tail_len - self.tail_limit
        if excess > 0:
            self._elide(self.tail[0][:excess])
            self.tail[0] = self.tail[0][excess:]

    def _elide(self, text: str) -> None:
        self.tail_len -= len(text)
        self.elided_chars += len(text)
        self.elided_lines += text.count("\n")

    def render(self) -> str:
        head, tail = "".join(self.head), "".join(self.tail)
        if not self.elided_chars:
            return head + tail
        note = (f"\n[... {self.elided_chars} characters ({self.elided_lines} lines) elided ...]\n")
        return head + note + tail


def _kill_group(pgid: int, proc: subprocess.Popen, term_wait: float = 1.0) -> None:
    """SIGTERM the whole process group, then SIGKILL whatever is left after `term_wait` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + (term_wait if sig == signal.SIGTERM else 1.0)
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, or its zombie keeps the group alive
            if not _group_alive(pgid):
                return
            time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group (zombies wait for their reaper)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat_line.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _wait(proc: subprocess.Popen, limit: float, cancel: threading.Event | None) -> str:
    """Wait for the command: "exited", "timeout" or "cancelled" (polled every POLL_SECONDS)."""
    deadline = time.monotonic() + limit
    while True:
        if cancel is not None and cancel.is_set():
            return "cancelled"
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        step = min(left, POLL_SECONDS) if cancel is not None else left
        try:
            proc.wait(timeout=step)
            return "exited"
        except subprocess.TimeoutExpired:
            continue


def run_shell(root: Path, command: str, timeout: float | None = None,
              on_output: Callable[[str], None] | None = None,
              cancel: threading.Event | None = None) -> ToolResult:
    """Run `command` with bash in `root`; returns its capped output and exit code.

    When `cancel` is set while the command runs, its whole process group is killed at once
    and the result is ok=False with details["cancelled"] = True.
    """
    if not command or not command.strip():
        return ToolResult(False, "empty command", {"error": "bad_arguments"})
    limit = float(timeout) if timeout and float(timeout) > 0 else DEFAULT_TIMEOUT
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "PAGER": "cat", "GIT_PAGER": "cat",
           "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(["bash", "-c", command], cwd=Path(root), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return ToolResult(False, f"could not start the command: {exc}", {"error": "spawn"})
    pgid = proc.pid  # start_new_session: the child leads its own group
    captured = CappedOutput()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def pump() -> None:
        fd = proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            text = decoder.decode(chunk)
            if text:
                captured.add(text)
                if on_output is not None:
                    try:
                        on_output(text)
                    except Exception:  # a consumer's bug must not kill the command's reader
                        pass
        tail = decoder.decode(b"", final=True)
        if tail:
            captured.add(tail)

    reader = threading.Thread(target=pump, name="run_shell-reader", daemon=True)
    reader.start()
    outcome = _wait(proc, limit, cancel)
    timed_out, cancelled = outcome == "timeout", outcome == "cancelled"
    if outcome != "exited":
        _kill_group(pgid, proc, term_wait=0.2 if cancelled else 1.0)
        proc.wait()
    killed_background = False
    if outcome == "exited":
        reader.join(timeout=GRACE_AFTER_EXIT)
        # whatever the command left running in its group (also children that redirected
        # their output away from our pipe) does not outlive the call
        if _group_alive(pgid):
            killed_background = True
            _kill_group(pgid, proc)
    reader.join(timeout=2.0)
    proc.stdout.close()
    elapsed = time.monotonic() - started
    code = proc.returncode
    text = captured.render()
    notes = []
    if cancelled:
        notes.append("[cancelled by the user; the command and its children were killed]")
    elif timed_out:
        notes.append(f"[timed out after {limit:g} s; the command and its children were killed]")
    elif killed_background:
        notes.append("[background processes left running by the command were stopped]")
    if code is not None and code < 0 and not (timed_out or cancelled):
        notes.append(f"[killed by signal {-code}]")
    notes.append(f"[exit code {code}]")
    output = (text.rstrip("\n") + "\n" if text.strip() else "") + "\n".join(notes)
    details = {"exit_code": code, "timed_out": timed_out, "seconds": round(elapsed, 3),
               "elided_chars": captured.elided_chars, "elided_lines": captured.elided_lines}
    if cancelled:
        details["cancelled"] = True
    return ToolResult(code == 0 and not (timed_out or cancelled), output, details)

