"""`replay:FILE`: scripted completions for tests and demos.

The file is {"completions": ["raw assistant text 1", ...]}; each model call returns the next one,
streamed in small chunks and parsed exactly like a real model's output. Exhausted: an empty answer.
Optional keys "chunk_chars" and "delay" (seconds after each chunk, like a slow model step that
cannot be interrupted) set the pace when the caller does not. The file must be a regular file or a pipe
(`replay:<(command)`, a FIFO: read when its writer writes) of at most MAX_REPLAY_BYTES; a device or
folder is refused at once (`replay:/dev/zero` was read whole, 2.9 GB, to a MemoryError).
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Iterator

from clover_cli.agent.backends.base import BackendError, Completion, ModelBackend, StreamItem
from clover_cli.agent.markup import MarkupSplitter, block_texts
from clover_cli.engine.config import DEFAULT_THRESHOLD
from clover_cli.tools.textio import FileTooLargeError, NotRegularFileError, read_regular

MAX_REPLAY_BYTES = 64 * 1024 * 1024


class ReplayBackend(ModelBackend):
    """Returns scripted completions one per call."""

    def __init__(self, path: str | Path, threshold: float = DEFAULT_THRESHOLD, chunk_chars: int | None = None,
                 delay: float | None = None, context_window: int = 32768) -> None:
        super().__init__(threshold)
        self.path = Path(path)
        try:
            data = json.loads(read_regular(self.path, MAX_REPLAY_BYTES, allow_pipe=True).decode("utf-8"))
        except FileNotFoundError:
            raise BackendError(f"replay file {str(self.path)!r} not found") from None
        except NotRegularFileError as e:
            raise BackendError(f"replay file {str(self.path)!r} cannot be used: {e}") from None
        except FileTooLargeError:
            raise BackendError(f"replay file {str(self.path)!r} is larger than "
                               f"{MAX_REPLAY_BYTES // 2**20} MiB") from None
        except OSError as e:
            raise BackendError(f"replay file {str(self.path)!r} cannot be read: {e.strerror or e}") from None
        except (ValueError, RecursionError) as e:
            raise BackendError(f"replay file {str(self.path)!r} is not valid JSON: {e}") from None
        comps = data.get("completions") if isinstance(data, dict) else None
        if not isinstance(comps, list) or not all(isinstance(c, str) for c in comps):
            raise BackendError(f"replay file {str(self.path)!r} must be {{\"completions\": [\"text\", ...]}}")
        self.completions = list(comps)
        self.calls = 0
        self.prompts: list[list[dict]] = []  # what each call was given (for tests and demos)
        self.name = f"replay:{self.path.name}"
        try:
            self.chunk_chars = max(1, int(chunk_chars if chunk_chars is not None else data.get("chunk_chars", 16)))
            self.delay = max(0.0, float(delay if delay is not None else data.get("delay", 0.0)))
        except (TypeError, ValueError):
            raise BackendError(f"replay file {str(self.path)!r}: chunk_chars and delay must be numbers") from None
        self.context_window = int(context_window)
        self._lock = threading.Lock()

    def stream(self, messages: list[dict], tools: list[dict], *, max_new_tokens: int = 2048,
               cancel: threading.Event | None = None) -> Iterator[StreamItem]:
        with self._lock:
            index = self.calls
            self.calls += 1
            self.prompts.append([dict(m) for m in messages])
        text = self.completions[index] if index < len(self.completions) else ""
        start = time.perf_counter()
        splitter = MarkupSplitter()
        sent = ""
        for block, k in enumerate(range(0, len(text), self.chunk_chars)):
            if cancel is not None and cancel.is_set():
                yield from block_texts(splitter, "", block, final=True)  # held call text included
                yield Completion(sent, "cancelled", stats=_stats(sent, block, start))
                return
            chunk = text[k:k + self.chunk_chars]
            sent += chunk
            yield from block_texts(splitter, chunk, block)
            if self.delay:
                time.sleep(self.delay)
        yield from block_texts(splitter, "", len(text) // self.chunk_chars, final=True)
        yield Completion(text, "stop", stats=_stats(text, -(-len(text) // self.chunk_chars), start))


def _stats(text: str, blocks: int, start: float) -> dict:
    seconds = time.perf_counter() - start
    tokens = len(text) // 4
    return {"generated_tokens": tokens, "forwards": blocks, "blocks": blocks,
            "total_seconds": round(seconds, 4),
            "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0}
