"""next_item: the shared wait on a worker's queue."""
from __future__ import annotations

import queue
import threading
import time

from clover_cli.agent.queues import STOPPED, next_item


def test_returns_items_in_order_and_waits_for_late_ones():
    q: queue.Queue = queue.Queue()
    q.put("a")
    threading.Timer(0.2, q.put, args=("b",)).start()
    assert next_item(q) == "a"
    t = time.monotonic()
    assert next_item(q) == "b"
    assert time.monotonic() - t >= 0.1


def test_stop_wins_over_queued_items_and_ends_a_wait():
    q: queue.Queue = queue.Queue()
    q.put("a")
    assert next_item(q, lambda: True) is STOPPED
    flag = threading.Event()
    threading.Timer(0.2, flag.set).start()
    t = time.monotonic()
    assert next_item(queue.Queue(), flag.is_set) is STOPPED
    assert 0.1 <= time.monotonic() - t < 2.0
