"""A one-line batch progress display on stderr: bar, counts, elapsed time.

On a terminal the line is redrawn in place; otherwise (logs, CI, tests) one line is printed per
change, so the record stays readable.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def format_elapsed(seconds: float) -> str:
    """`H:MM:SS` for a duration in seconds."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    """Counts instances done / failed / skipped / running and draws them."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 20,
                 clock=time.monotonic):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self._clock = clock
        self.started_at = clock()
        self.done = self.errors = self.skipped = self.running = 0
        self._lock = threading.Lock()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, note: str = "") -> str:
        """The progress text, e.g. `[#####---] 3/8 ok 2 err 1 skip 0 run 2 0:00:41 note`."""
        finished = self.done + self.errors + self.skipped
        filled = self.width * finished // self.total if self.total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        text = (f"[{bar}] {finished}/{self.total} ok {self.done} err {self.errors} "
                f"skip {self.skipped} run {self.running} {format_elapsed(self._clock() - self.started_at)}")
        return f"{text} {note}".rstrip()

    def _draw(self, note: str) -> None:
        text = self.line(note)
        if self._tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, note: str = "") -> None:
        """An instance started running."""
        with self._lock:
            self.running += 1
            self._draw(note)

    def finish(self, status: str, note: str = "", was_running: bool = True) -> None:
        """An instance ended as "done", "error" or "skipped" (was_running: it had start()ed)."""
        with self._lock:
            if was_running:
                self.running -= 1
            if status == "done":
                self.done += 1
            elif status == "skipped":
                self.skipped += 1
            else:
                self.errors += 1
            self._draw(note)

    def close(self) -> None:
        """End the line on a terminal."""
        with self._lock:
            if self._tty:
                self.stream.write("\n")
                self.stream.flush()
