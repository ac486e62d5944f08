"""What a front end that draws the agent's events itself (the TUI, `clover acp`) is handed: each
turn's events with the API key scrubbed (redact.py's EventRedactor), plus a Notice when a remote
model has sent nothing for a while, so a wait (a slow server, a Retry-After, headers that trickle
in) is said on screen rather than shown as a frozen turn (docs/security.md, "Redaction";
docs/agent.md). `clover run` prints through redacted stdout/stderr and says waits itself.

Standard library only (no textual, no acp): both front ends use it.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from clover_cli.agent.events import Notice
from clover_cli.agent.redact import EventRedactor

# silence from a remote model before a "waiting" notice (CLOVER_WAIT_NOTICE_S: tests use a short one)
WAIT_NOTICE_SECONDS = 10.0


def _every() -> float:
    try:
        return float(os.environ.get("CLOVER_WAIT_NOTICE_S", WAIT_NOTICE_SECONDS))
    except ValueError:
        return WAIT_NOTICE_SECONDS


def wait_message(backend: Any, silent_for: float) -> str:
    """The notice for `silent_for` seconds without a word from `backend`'s server."""
    where = getattr(backend, "base_url", None) or "the server"
    limit = getattr(backend, "request_timeout", None)
    tail = f"; a request gives up after {limit:g} s (--request-timeout)" if limit else ""
    return f"waiting for {where}: nothing received for {silent_for:.0f} s{tail}"


class ShownEvents:
    """Hands a turn's events to `post`, one at a time (a lock: the silence watch posts from its
    own thread): scrubbed, and with a "waiting" Notice after every `every` seconds in which the
    `agent`'s remote model (a backend with a `request_timeout`) sent nothing. Call `event(e)`
    for each event and `end()` once the turn is over. The front end hands the agent; only this
    module looks at its backend (docs/design.md, Boundaries)."""

    def __init__(self, post: Callable[[Any], None], agent: Any = None,
                 every: float | None = None) -> None:
        backend = getattr(agent, "backend", None)
        self._post = post
        self._redactor = EventRedactor()
        self._lock = threading.Lock()
        self._quiet_since = self._said = time.monotonic()
        self._asking = True  # the model is being asked (not a tool, not an approval)
        self._done = threading.Event()
        self._backend = backend
        every = _every() if every is None else every
        if backend is not None and getattr(backend, "request_timeout", None) and every > 0:
            threading.Thread(target=self._watch, args=(float(every),), daemon=True,
                             name="clover-wait-notice").start()

    def event(self, e: Any) -> None:
        """Scrub `e` and post what may be shown now."""
        with self._lock:
            self._quiet_since = time.monotonic()
            kind = type(e).__name__
            if kind in ("ToolCallProposed", "ApprovalRequested", "ToolOutput"):
                self._asking = False  # a tool runs or the user decides: not the server's silence
            elif kind == "ToolFinished":
                self._asking = True
            for shown in self._redactor.feed(e):
                self._post(shown)

    def end(self) -> None:
        """The turn is over: post any held text and stop watching."""
        self._done.set()
        with self._lock:
            for shown in self._redactor.release():
                self._post(shown)

    def _watch(self, every: float) -> None:
        while not self._done.wait(every / 4):
            with self._lock:
                now = time.monotonic()
                silent = now - self._quiet_since
                if not self._asking or self._done.is_set() or now - max(self._quiet_since, self._said) < every:
                    continue
                self._said = now  # the next notice after another `every` seconds
                for shown in self._redactor.feed(Notice(wait_message(self._backend, silent))):
                    self._post(shown)
