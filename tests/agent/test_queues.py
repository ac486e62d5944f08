"""next_item: the shared wait on a worker's queue."""
from __future__ import annotations

import queue
import threading

from clover_cli.agent.queues import STOPPED, next_item


def test_returns_items_in_order_and_waits_for_late_ones():
    q: queue.Queue = queue.Queue()
    q.put("a")
    assert next_item(q) == "a"
    threading.Timer(0.2, q.put, args=("b",)).start()
    assert next_item(q) == "b"
    polls = []

    def stop():  # "c" arrives only after two empty polls: the wait is forced, not timed
        polls.append(1)
        if len(polls) == 3:
            q.put("c")
        return False
    assert next_item(q, stop) == "c" and len(polls) == 3


def test_stop_wins_over_queued_items_and_ends_a_wait():
    q: queue.Queue = queue.Queue()
    q.put("a")
    assert next_item(q, lambda: True) is STOPPED
    flag = threading.Event()
    threading.Timer(0.2, flag.set).start()
    assert next_item(queue.Queue(), flag.is_set) is STOPPED
    polls = []
    assert next_item(queue.Queue(), lambda: polls.append(1) or len(polls) == 3) is STOPPED
    assert len(polls) == 3  # stop is asked again after each empty poll
