"""The approval dialog: the diff or command, answered with y (yes), n (no + feedback), a (always)."""
from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from clover_cli.agent.events import ApprovalAnswer, ApprovalRequested
from clover_cli.tui.widgets.tool_panel import code_view, summarize_args


class ApprovalScreen(ModalScreen[ApprovalAnswer]):
    """Dismisses with the ApprovalAnswer; the caller puts it into the request's future."""

    BINDINGS = [
        Binding("y", "answer('yes')", "Yes", show=False),
        Binding("a", "answer('always')", "Always", show=False),
        Binding("n", "no", "No", show=False),
        Binding("escape", "answer('no')", "No", show=False),
    ]

    def __init__(self, request: ApprovalRequested) -> None:
        super().__init__(classes="approval-screen")
        self.request = request

    def compose(self) -> ComposeResult:
        req = self.request
        with Vertical(id="approval-dialog"):
            yield Static(f"[b]Allow {escape(req.name)}?[/b] {escape(summarize_args(req.name, req.arguments))}",
                         id="approval-title")
            with VerticalScroll(id="approval-summary"):
                yield Static(code_view(req.summary or "(nothing to show)"))
            yield Input(placeholder="why not? (Enter sends, empty is fine)", id="approval-feedback")
            with Horizontal(id="approval-buttons"):
                yield Button("[u]Y[/u]es", id="yes", variant="success", compact=True)
                yield Button("[u]N[/u]o", id="no", variant="error", compact=True)
                # an empty key means nothing safe to remember (a wrapper, an interpreter): once only
                scope = escape(req.always_key) if req.always_key else "this call only"
                yield Button(f"[u]A[/u]lways ({scope})", id="always", compact=True)

    def on_mount(self) -> None:
        self.query_one("#approval-feedback").display = False
        self.query_one("#yes", Button).focus()

    def action_answer(self, decision: str, feedback: str = "") -> None:
        """Dismiss with the given decision."""
        self.dismiss(ApprovalAnswer(decision, feedback))

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
