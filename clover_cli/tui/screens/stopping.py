"""Stopping a turn: Ctrl+C, Esc and quitting (a mixin of ChatScreen; docs/tui.md, "Interrupt").

`stop_turn` is the one place that stops the agent: it cancels the running turn or compaction
first and answers a pending approval "no" after, in that order (an agent woken by the "no"
before the cancel would ask the model again).
"""
from __future__ import annotations

import time

from clover_cli.agent import events as ev
from clover_cli.tui.screens.busy import INTERRUPTING, Busy

QUIT_WINDOW_SECONDS = 3.0  # a second Ctrl+C within this window quits


class TurnStopping:
    """Mixed into ChatScreen (which provides `agent`, `driver`, `busy`, `approval`, `queued`)."""

    _quit_armed_until = 0.0

    def stop_turn(self, why: str, closing: bool = False) -> bool:
        """Cancel the running turn or compaction, then answer a pending approval "no" with `why`.

        `closing` (quit, unmount): cancel whatever runs and answer the approval's future
        directly, leaving the widgets alone. Returns True when a turn or compaction was running."""
        running = self.agent is not None and (self.busy.stoppable or (closing and bool(self.busy)))
        if running:
            if self.driver is not None and self.driver.running:
                self.driver.cancel()  # it also answers the approvals it holds "no"
            else:
                self.agent.cancel()
        if self.approval is not None:
            request, dialog = self.approval
            answer = ev.ApprovalAnswer("no", why)
            if closing or not dialog.is_attached:
                if not request.future.done():
                    request.future.set_result(answer)
            else:
                dialog.dismiss(answer)
        return running and self.busy.stoppable

    def interrupt(self, quit_on_second: bool = True) -> None:
        """Ctrl+C / Esc: cancel generation (or a pending approval); a second Ctrl+C quits.

        The agent stops at its next block or tool poll (docs/tui.md, "Interrupt"); the notice
        goes to the hint line above the prompt, never over it."""
        now = time.monotonic()
        if quit_on_second and now < self._quit_armed_until:
            self.quit()
            return
        if quit_on_second:
            self._quit_armed_until = now + QUIT_WINDOW_SECONDS
        again = " (Ctrl+C again to quit)" if quit_on_second else ""
        if self.busy.stoppable and self.agent is not None:
            self.interrupted_at, self.stopped_at = time.perf_counter(), None
        running = self.stop_turn("Interrupted by the user.")
        if self.queued and self.busy is not Busy.LOADING:
            self.drop_queued("interrupted")
        if running:
            self.status.set(busy=INTERRUPTING)
            self.set_hint(f"Interrupting…{again}", QUIT_WINDOW_SECONDS)
        elif quit_on_second:
            self.set_hint("Press Ctrl+C again to quit.", QUIT_WINDOW_SECONDS)

    def quit_hint_after_cancel(self) -> None:
        """After an interrupted turn: keep "Press Ctrl+C again to quit" while the window lasts."""
        left = self._quit_armed_until - time.monotonic()
        self.set_hint("Press Ctrl+C again to quit." if left > 0.1 else "", max(left, 0.0))

    def disarm_quit(self) -> None:
        """Anything sent ends the double-Ctrl+C window."""
        self._quit_armed_until = 0.0

    def on_unmount(self) -> None:
        self.stop_turn("The user quit.", closing=True)

    def quit(self) -> None:
        """Stop any generation and exit. Returns {"session_id", "session_path", "saved"} to
        `CloverApp.run()`'s caller (saved: the session file exists: something was sent)."""
        self.stop_turn("The user quit.", closing=True)
        info = None
        if self.agent is not None:
            path = self.agent.session_path
            info = {"session_id": self.agent.session_id, "session_path": str(path or ""),
                    "saved": bool(path) and path.is_file()}
        self.app.exit(info)
