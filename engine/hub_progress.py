"""Download progress on stderr (engine/hub.py): one line a file, redrawn in place on a terminal;
elsewhere (a log, a pipe) a line at the start, at each tenth of the file and at the end. Files
under 1 MiB (configs, tokenizer files) are fetched silently."""
from __future__ import annotations

import sys
import time

QUIET_BELOW = 1 << 20


def _size(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


class Progress:
    """Bytes of one file: `update(n)` as they arrive, `close()` at the end."""

    def __init__(self, name: str, total: int | None, initial: int = 0, stream=None):
        self.name, self.total, self.done = name, total, initial
        self.stream = stream or sys.stderr
        self.quiet = total is not None and total < QUIET_BELOW
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.initial = initial
        self.tenth = self._tenth()
        self._last_draw = 0.0
        resumed = f", resuming at {_size(initial)}" if initial else ""
        self._line(f"clover: {name}: {_size(total) if total is not None else 'size unknown'}{resumed}",
                   final=not self.tty)

    def _tenth(self) -> int:
        return int(10 * self.done / self.total) if self.total else 0

    def _line(self, text: str, final: bool) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _status(self) -> str:
        rate = (self.done - self.initial) / max(time.monotonic() - self.start, 1e-3)
        if self.total:
            pct = 100 * self.done / self.total
            return (f"clover: {self.name}: {_size(self.done)} / {_size(self.total)} ({pct:.0f}%), "
                    f"{_size(rate)}/s")
        return f"clover: {self.name}: {_size(self.done)}, {_size(rate)}/s"

    def update(self, n: int) -> None:
        """Count `n` more bytes; redraw (terminal: at most 5 times a second) or log a tenth."""
        self.done += n
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw >= 0.2:
                self._last_draw = now
                self._line(self._status(), final=False)
            return
        tenth = self._tenth()
        if tenth > self.tenth and tenth < 10:
            self.tenth = tenth
            self._line(self._status(), final=True)

    def close(self) -> None:
        """The file is whole: its last line."""
        self._line(self._status().replace(" (100%)", "") + " - done", final=True)
