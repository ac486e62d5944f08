"""The worker process grep's Python engine searches in, killed at the wall-clock deadline.

Why a process: the `regex` module's `timeout=` counts CPU time, not the wall clock, and nothing
else can stop a match in progress. On a loaded machine one match given 0.5 s took 1.9 s by the
wall clock, and 3.5 s with a busy loop beside it on the same core (docs/tools.md, "grep"). So the
caller keeps the deadline by the wall clock: it reads the worker's answer file by file until the
deadline, then kills the worker and keeps what it had (`Found.timed_out`, the matches so far).

The worker stays up between searches (one start, ~0.2 s, per process that greps; a new one after
a kill). Its start is not the search's: the deadline counts from when it says it is ready (start
bounded by STARTUP_SECONDS). It serves one JSON request a line on stdin: {"root", "rels",
"pattern", "flags", "seconds"}, and answers with grepsearch.scan's records, one JSON line each,
then {"done": true}.
It runs with `-P` (the searched repository's files never shadow a module) and, for each request,
a CPU-time limit a little over the deadline, so a worker whose caller died stops on its own.
Where no worker can start, the search runs in this process (grepsearch.search_here).
"""
from __future__ import annotations

import atexit
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import regex

from .grepsearch import Deadline, Found, GrepTimeout, add, scan, search_here

WORKER = [sys.executable, "-P", "-m", "clover_cli.tools.grepworker"]
STARTUP_SECONDS = 30.0  # a worker not ready by then is killed, and the search runs here
_lock = threading.Lock()  # one search at a time talks to the worker
_worker: "_Worker | None" = None


class _Worker:
    """The worker process and a thread that queues its output lines (None at its end)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with self.proc.stdout:
            for line in self.proc.stdout:
                self.lines.put(line)
        self.lines.put(None)

    def send(self, request: dict) -> None:
        """Write one request (in its own thread: a worker that reads slowly cannot hold the caller
        past the deadline)."""
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # killed meanwhile
            pass

    def kill(self) -> None:
        self.proc.kill()
        self.end()

    def end(self) -> None:
        """Wait for the process and its reader; close the pipes."""
        self.proc.wait()
        self.reader.join(timeout=1)
        try:
            self.proc.stdin.close()
        except OSError:  # a request still being written to the killed worker
            pass


def search(root: Path, rels: list[str], rx: regex.Pattern, deadline: Deadline) -> Found:
    """grepsearch.search_files in the worker; at the deadline the worker is killed and the files
    answered so far come back with `timed_out`."""
    global _worker
    with _lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _start()
            if _worker is None:
                return search_here(root, rels, rx, deadline)
            deadline = Deadline(deadline.seconds)  # the search's time starts now
        worker = _worker
        request = {"root": str(root), "rels": rels, "pattern": rx.pattern, "flags": rx.flags,
                   "seconds": deadline.seconds}
        threading.Thread(target=worker.send, args=(request,), daemon=True).start()
        found = Found()
        while True:
            try:
                line = worker.lines.get(timeout=deadline.left())
            except (queue.Empty, GrepTimeout):
                worker.kill()
                _worker = None
                found.timed_out = True
                return found
            if line is None:  # the worker died before the deadline: search here instead
                worker.end()
                _worker = None
                return search_here(root, rels, rx, deadline)
            record = json.loads(line)
            if record.get("done"):
                found.timed_out = bool(record.get("timed_out"))
                return found
            add(found, record)


def _start() -> _Worker | None:
    """A worker that said it is ready, or None."""
    try:
        worker = _Worker()
    except OSError:
        return None
    atexit.register(_close, worker)
    try:
        ready = worker.lines.get(timeout=STARTUP_SECONDS)
    except queue.Empty:
        ready = None
    if ready is None or ready.strip() != b'{"ready": true}':
        worker.kill()
        return None
    return worker


def _close(worker: _Worker) -> None:
    """At exit: an idle worker ends when its stdin closes; a busy one is killed."""
    if worker.proc.poll() is not None:
        return
    try:
        worker.proc.stdin.close()
        worker.proc.wait(timeout=1)
    except (OSError, subprocess.TimeoutExpired):
        worker.proc.kill()
    worker.end()


def _limit_cpu(seconds: float) -> None:
    """End this worker with SIGXCPU once it has used `seconds` more CPU time."""
    try:
        import resource
    except ImportError:  # not on this platform: the caller's kill is the only bound
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + seconds) + 2
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY or soft <= hard:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _write(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main() -> None:
    """The worker's loop: one request a line until stdin closes."""
    _write({"ready": True})
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        _limit_cpu(request["seconds"])
        deadline = Deadline(request["seconds"])
        rx = regex.compile(request["pattern"], request["flags"])
        try:
            for record in scan(Path(request["root"]), request["rels"], rx, deadline):
                _write(record)
        except GrepTimeout:
            _write({"done": True, "timed_out": True})
            continue
        _write({"done": True})


if __name__ == "__main__":
    main()
