"""What the chat screen is busy with, as a type: `ChatScreen.busy` holds one of these and only
`ChatScreen.set_busy` changes it (docs/tui.md, "Status bar").

`Busy` is a `str` enum so that it reads as its value: `Busy.IDLE` is "" (false), the others are
true, and `busy == "generating"` still holds for `Busy.GENERATING`. What the status bar shows
while a turn runs ("generating", "awaiting approval", "running CMD") is `activity`, finer than
this state; see ChatScreen.show_activity.
"""
from __future__ import annotations

from enum import Enum


class Busy(str, Enum):
    """The screen's one long-running job, if any."""

    IDLE = ""
    LOADING = "loading"  # a model loads (or a session reopens) in the load thread
    GENERATING = "generating"  # a turn runs on the turn driver's worker thread
    COMPACTING = "compacting"  # /compact runs on the turn driver's worker thread
    WORKING = "working"  # a blocking agent call: /undo, /diff, /clear

    @property
    def stoppable(self) -> bool:
        """Esc / Ctrl+C cancel it (a turn or a compaction)."""
        return self in (Busy.GENERATING, Busy.COMPACTING)

    def __str__(self) -> str:
        return self.value


GENERATING = "generating"  # the model generates (or reads its prompt)
AWAITING_APPROVAL = "awaiting approval"
INTERRUPTING = "interrupting"


def running(name: str, arguments: dict, width: int = 32) -> str:
    """The status text while a tool runs: "running CMD" for a command, else "running TOOL"."""
    command = arguments.get("command") if isinstance(arguments, dict) else None
    what = " ".join(str(command).split()) if command else name
    return "running " + (what if len(what) <= width else what[: width - 1] + "…")
