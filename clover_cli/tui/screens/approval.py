"""The approval dialog: the diff or command, answered with y (yes), n (no + feedback), a (always).

A widget docked at the bottom of the chat screen (over the prompt), not a modal screen: the
transcript stays visible above it (docs/tui.md, "Approvals"). Focus sits on its buttons while it
is open; `y`, `n`, `a` and Esc work from anywhere in the chat screen (screens/focus.py).
"""
from __future__ import annotations

import time
from typing import Callable

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Static

from clover_cli.agent.events import ApprovalAnswer, ApprovalRequested
from clover_cli.tui.widgets.tool_panel import code_view, summarize_args


class ApprovalDialog(Vertical):
    """Calls `on_answer(ApprovalAnswer)` once and removes itself.

    For GUARD_SECONDS after it opens, "yes" and "always" (keys, Enter on the focused Yes button,
    clicks) are ignored: a user still typing a message when the dialog appears must not approve
    a command with a stray `y`, `a` or Enter. "no" and Esc work at once."""

    GUARD_SECONDS = 0.6

    BINDINGS = [
        Binding("y", "answer('yes')", "Yes", show=False),
        Binding("a", "answer('always')", "Always", show=False),
        Binding("n", "no", "No", show=False),
        Binding("escape", "answer('no')", "No", show=False),
    ]

    def __init__(self, request: ApprovalRequested, on_answer: Callable[[ApprovalAnswer], None]) -> None:
        super().__init__(id="approval-dialog")
        self.request = request
        self.on_answer = on_answer
        self.answered = False

    def compose(self) -> ComposeResult:
        req = self.request
        yield Static(f"[b]Allow {escape(req.name)}?[/b] {escape(summarize_args(req.name, req.arguments))}",
                     id="approval-title")
        with VerticalScroll(id="approval-summary"):
            yield Static(code_view(req.summary or "(nothing to show)"))
        yield Input(placeholder="why not? (Enter sends, empty is fine)", id="approval-feedback")
        with Horizontal(id="approval-buttons"):
            yield Button("\\[y] Yes", id="yes", variant="success", compact=True)
            yield Button("\\[n] No", id="no", variant="error", compact=True)
            # an empty key means nothing safe to remember (a wrapper, an interpreter): once only
            scope = escape(req.always_key) if req.always_key else "this call only"
            yield Button(f"\\[a] Always ({scope})", id="always", compact=True)

    def on_mount(self) -> None:
        self.opened_at = time.monotonic()
        self.query_one("#approval-feedback").display = False
        self.focus_default()

    def focus_default(self) -> None:
        """Focus the feedback box when it is open, else the Yes button (nothing once the dialog
        is being removed: a refocus queued before an answer or Ctrl+C may run after it)."""
        boxes, yes = self.query("#approval-feedback").results(Input), self.query("#yes").results(Button)
        box, button = next(boxes, None), next(yes, None)
        if not self.is_attached or box is None or button is None:
            return
        (box if box.display else button).focus(scroll_visible=False)

    @property
    def asking_feedback(self) -> bool:
        return bool(self.query_one("#approval-feedback").display)

    def dismiss(self, answer: ApprovalAnswer) -> None:
        """Answer (once) and close."""
        if self.answered:
            return
        self.answered = True
        self.on_answer(answer)
        self.remove()

    def action_answer(self, decision: str, feedback: str = "") -> None:
        """Dismiss with the given decision (a yes/always inside the guard window is ignored)."""
        opened = getattr(self, "opened_at", None)
        if decision in ("yes", "always") and (
                opened is None or time.monotonic() - opened < self.GUARD_SECONDS):
            self.app.bell()
            return
        self.dismiss(ApprovalAnswer(decision, feedback))  # type: ignore[arg-type]

    def action_no(self) -> None:
        """'n': ask for optional feedback, then Enter sends the no."""
        box = self.query_one("#approval-feedback", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_answer("no", event.value.strip())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "no":
            self.action_no()
        else:
            self.action_answer(event.button.id or "no")
