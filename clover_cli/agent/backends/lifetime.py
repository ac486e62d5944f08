"""How long a backend lives when several agents use it: one in-process model shared under a lock,
or a fresh backend per use (docs/design.md, "Agent"; docs/agent.md).

`clover swebench` hands each instance a backend through `BackendProvider`; an in-process engine
model is loaded once and shared through `LockedBackend`, which lets one generation run at a time.
"""
from __future__ import annotations

import threading
from typing import Callable


class LockedBackend:
    """Shares one in-process model between worker threads: one generation at a time.

    An in-process engine model is not thread-safe; this wrapper holds a lock for the whole of
    each `stream` call and forwards everything else to the wrapped backend.
    """

    def __init__(self, backend, lock: threading.Lock | None = None):
        self._backend = backend
        self._lock = lock or threading.Lock()

    def stream(self, *args, **kwargs):
        """The wrapped backend's stream, generated under the lock."""
        with self._lock:
            yield from self._backend.stream(*args, **kwargs)

    def reset_cache(self) -> None:
        """The wrapped backend's reset_cache, never during another worker's generation."""
        with self._lock:
            self._backend.reset_cache()

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def __setattr__(self, name, value):
        if name in ("_backend", "_lock"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._backend, name, value)


class BackendProvider:
    """Hands each instance a backend, safely for worker threads.

    In-process models (tiny, a checkpoint dir, hf:, smollm2) are loaded once and shared through a
    LockedBackend, so N workers do not hold N copies and never run the model concurrently.
    Other specs (replay:, openai:) get a fresh backend per call: a replay script starts from its
    first completion for every instance, and remote servers take concurrent requests.
    """

    def __init__(self, spec: str, factory: Callable[[str], object], in_process: bool,
                 preloaded=None):
        self.spec = spec
        self._factory = factory
        self._in_process = in_process or preloaded is not None
        self._shared = LockedBackend(preloaded) if preloaded is not None else None
        self._lock = threading.Lock()

    def get(self):
        """A backend for one instance; exceptions from loading propagate."""
        if not self._in_process:
            return self._factory(self.spec)
        with self._lock:
            if self._shared is None:
                self._shared = LockedBackend(self._factory(self.spec))
            return self._shared

    def release(self, backend) -> None:
        """Close a per-instance backend (the shared one stays until close())."""
        if backend is not self._shared and hasattr(backend, "close"):
            try:
                backend.close()
            except Exception:
                pass

    def close(self) -> None:
        """Close the shared backend, if one was loaded."""
        if self._shared is not None and hasattr(self._shared, "close"):
            try:
                self._shared.close()
            except Exception:
                pass
