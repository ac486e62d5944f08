"""Backend failures the agent can recover from inside the turn instead of ending it.

The agent (agent.py) catches these before the generic BackendError: a ContextOverflowError
compacts the conversation and asks again; a StreamFeedbackError keeps what the model had said
and tells it what went wrong, so it can carry on. A turn recovers at most a few times in a row,
then the error ends it like any other.
"""
from __future__ import annotations

from clover_cli.agent.backends.base import BackendError


class RecoverableError(BackendError):
    """A BackendError with a way on: compact first, keep the partial answer, tell the model."""

    compact: bool = False

    def __init__(self, message: str, partial_text: str = "", feedback: str = "") -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.feedback = feedback


class ContextOverflowError(RecoverableError):
    """The server refused the prompt as longer than its context window (HTTP 400 for length);
    the backend has already lowered its `context_window` to what the server said."""

    compact = True


class StreamFeedbackError(RecoverableError):
    """The server reported an error in the middle of an answer that had already streamed text."""


class AnswerCutOff(BackendError):
    """The connection dropped (or the server went silent) in the middle of an answer: the turn
    ends with this error, and what had streamed is kept as the assistant's message, marked as
    cut off, as a cancel keeps it (docs/agent.md, "Server dialects")."""

    def __init__(self, message: str, partial_text: str, stats: dict) -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.stats = stats
