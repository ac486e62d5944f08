"""Waiting on a queue fed by a worker thread while staying responsive to a stop condition
(a cancel event, a grace period) or to Ctrl+C in the main thread."""
from __future__ import annotations

import queue
from typing import Any, Callable

STOPPED = object()  # next_item's answer when stop() became true


def next_item(q: queue.Queue, stop: Callable[[], bool] | None = None, poll: float = 0.05) -> Any:
    """The next item of q, or STOPPED once stop() is true (checked before every wait of at most
    `poll` seconds, so items already queued do not delay a stop)."""
    while True:
        if stop is not None and stop():
            return STOPPED
        try:
            return q.get(timeout=poll)
        except queue.Empty:
            continue
