"""The main screen: transcript, denoise view, prompt and status bar, driven by agent events."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Label, Static, TextArea

from clover_cli.agent import events as ev
from clover_cli.agent.attachments import attach_mentions
from clover_cli.agent.driver import TurnDriver
from clover_cli.agent.history import PromptHistory
from clover_cli.agent.interface import AgentSession
from clover_cli.agent.shown import ShownEvents
from clover_cli.tui import slash
from clover_cli.tui.bridge import AgentEventMessage, SessionOptions, TaskDone, error_text, measured_model
from clover_cli.tui.screens import busy as activity
from clover_cli.tui.screens.approval import ApprovalDialog
from clover_cli.tui.screens.busy import Busy
from clover_cli.tui.screens.commands import SlashCommands
from clover_cli.tui.screens.focus import FocusKeeper
from clover_cli.tui.screens.loading import ModelLoading
from clover_cli.tui.screens.stopping import TurnStopping
from clover_cli.tui.widgets.denoise import DenoiseView
from clover_cli.tui.widgets.file_picker import FilePicker
from clover_cli.tui.widgets.messages import is_summary
from clover_cli.tui.widgets.prompt_input import PromptInput
from clover_cli.tui.widgets.status_bar import StatusBar, prefix_figures, short_model_name
from clover_cli.tui.widgets.transcript import Transcript

FRAME_SECONDS = 1 / 10  # render at most 10 frames per second while streaming (each may relayout)
RENDER_BUDGET = 0.05  # share of the UI thread's time that drawing may take (docs/tui.md)
MAX_FRAME_GAP = 1.0  # but text never waits longer than this


class ChatScreen(ModelLoading, TurnStopping, FocusKeeper, SlashCommands, Screen):
    """Wires agent events to widgets; long agent calls run in thread workers."""

    BINDINGS = [
        Binding("escape", "escape", "Interrupt", show=False),
        Binding("shift+tab", "focus_away", "Focus the transcript", show=False),
    ]

    def __init__(self, options: SessionOptions) -> None:
        super().__init__(id="chat")
        self.options = options
        self.agent: AgentSession | None = None
        self.driver: TurnDriver | None = None  # the running turn or compaction (its worker thread)
        self._busy = Busy.IDLE  # set by set_busy only
        self.queued: list[tuple[str, Any]] = []  # (prompt, its UserMessage) typed while loading
        self._load_started = 0.0
        self.interrupted_at: float | None = None  # perf_counter of the last Esc / Ctrl+C ...
        self.stopped_at: float | None = None  # ... and of the turn's end it caused (tests, docs)
        self.approval: tuple[ev.ApprovalRequested, ApprovalDialog] | None = None
        self.last_perf: dict[str, float] = {}
        self.options_before_switch: SessionOptions | None = None  # restored if /model fails
        self._turn_clock: tuple[float, float, float] | None = None
        self._last_draw: tuple[float, float] | None = None  # (wall, UI CPU) at the last drawn frame
        self._widgets: dict[type, Any] = {}

    # ----- layout
    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        yield Static("↓ new messages below · PageDown", id="new-below")
        with Horizontal(id="loading"):  # a 2 Hz text line, not an animation: the load needs the CPU
            yield Label(f"Loading {short_model_name(self.options.model)}…", id="loading-label")
        yield DenoiseView()
        yield Static("", id="completions")
        yield FilePicker(self.options.root)
        yield PromptInput(id="prompt", history=PromptHistory.for_root(self.options.root))
        yield StatusBar()

    def _scroll_transcript(self, pages: int) -> None:
        t = self.transcript
        t.scroll_page_up() if pages < 0 else t.scroll_page_down()

    def _one(self, kind: type) -> Any:
        """A widget composed once, looked up once (the 10 fps frame timer reads them)."""
        if kind not in self._widgets:
            self._widgets[kind] = self.query_one(kind)
        return self._widgets[kind]

    @property
    def transcript(self) -> Transcript:
        return self._one(Transcript)

    @property
    def status(self) -> StatusBar:
        return self._one(StatusBar)

    @property
    def denoise(self) -> DenoiseView:
        return self._one(DenoiseView)

    def on_mount(self) -> None:
        self.denoise.display = False
        self.query_one("#completions").display = False
        self._new_below = self.query_one("#new-below", Static)
        self._new_below.display = False
        self.picker.display = False
        self.prompt.picker = self.picker
        self.prompt.show_hint = self.set_hint
        self.prompt.scroll_transcript = self._scroll_transcript
        self.status.set(model=self.options.model, approval=self.options.approval,
                        threshold=self.options.threshold)
        self.prompt.focus()
        self.set_interval(FRAME_SECONDS, self._frame)
        self.set_interval(0.5, self._loading_progress)
        if not self.options.resume:
            self.welcome()
        for warning in self.options.warnings:  # before the TUI took the screen they went unseen
            self.transcript.add_notice(f"Warning: {warning}", "warning")
        self.load(self.options.resume)

    def _frame(self) -> None:
        """One render frame: flush buffered text and the denoise state, within the render budget.

        A frame is skipped (its text waits, coalesced) while the UI thread has used more than
        RENDER_BUDGET of the time since the last drawn frame (and less than MAX_FRAME_GAP has
        passed): on a slow machine the frame rate drops instead of the decoder losing time.
        """
        self._mark_unseen()
        if not (self.transcript.dirty or self.denoise.pending):
            return
        now, cpu = time.perf_counter(), time.thread_time()
        if self._last_draw is not None:
            wall, used = now - self._last_draw[0], cpu - self._last_draw[1]
            if used > RENDER_BUDGET * wall and wall < MAX_FRAME_GAP:
                return
        self.transcript.flush()
        self.denoise.refresh_view()
        self._last_draw = (now, cpu)

    def _mark_unseen(self) -> None:
        """Show "new messages below" while something added is out of view (scrolled up)."""
        unseen = self.transcript.seen_to_the_end()
        mark = self._new_below
        if mark.display != unseen:
            mark.display = unseen

    # ----- sending
    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.prompt_changed()

    def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        event.stop()
        text = event.text
        self.disarm_quit()
        if slash.is_slash(text):
            self.run_slash(text)
        elif self.busy is Busy.LOADING:
            shown = self.transcript.add_user(text)
            shown.set_queued(True)
            self.queued.append((text, shown))
            self._loading_progress()
        elif self.busy:
            self.set_hint("Still working — Esc interrupts; your text is back in the prompt.", 4)
            self.prompt.load_text(text)
        elif self.agent is None:
            self.error("No model is loaded; use /model SPEC to load one.")
        else:
            self.send(text)

    def send(self, text: str, show: bool = True) -> None:
        """Start a turn with `text` in a worker thread."""
        if show:
            self.transcript.add_user(text)
        full, attached = attach_mentions(text, self.options.root)
        if attached:
            self.transcript.add_notice("Attached " + ", ".join(attached) + ".")
        self.set_busy(Busy.GENERATING)
        self._turn_clock = (time.perf_counter(), time.thread_time(), time.process_time())
        self.drive(full)

    def drive(self, text: str | None = None, *, source=None) -> None:
        """Run a turn with `text` (or the agent generator `source()`: compaction) on the turn
        driver's worker thread (clover_cli/agent/driver.py, shared with `clover run`): each event
        is posted to the UI thread, then TaskDone("stream") with the context size. Approvals are
        answered by the dialog through the request's future; Esc / Ctrl+C call its cancel()."""
        agent = self.agent  # events scrubbed of the API key, a silent server's wait said (agent/shown.py)
        shown = ShownEvents(lambda e: self._forward(agent, e), agent)
        self.driver = TurnDriver(agent, on_event=shown.event, on_end=lambda _: (
            shown.end(), self.post_message(TaskDone("stream", agent.context_tokens()))))
        if source is not None:
            self.driver.start(source=source)
        else:
            self.driver.start(text)

    def _forward(self, agent: AgentSession, e: ev.AgentEvent) -> None:
        """On the turn's worker thread: post the event; when the turn starts, with the context's
        size counting the prompt being answered (the worker waits here, so the count is safe)."""
        context = agent.context_tokens(pending=e.user_text) if isinstance(e, ev.TurnStarted) else None
        self.post_message(AgentEventMessage(e, context))

    @property
    def busy(self) -> Busy:
        """What the screen is busy with (screens/busy.py); changed by set_busy only."""
        return self._busy

    def set_busy(self, busy: Busy) -> None:
        """Record what is running and show it in the status bar."""
        self._busy = Busy(busy)
        self.show_activity("" if busy is Busy.LOADING else self._busy.value)
        if not busy:
            self.denoise.clear()

    def show_activity(self, text: str) -> None:
        """The status bar's "what is running" (generating, awaiting approval, running CMD);
        "interrupting" stays until the turn ends."""
        shown = self.status.info.busy
        if shown != text and (shown != activity.INTERRUPTING or not self.busy):
            self.status.set(busy=text)

    def _model_activity(self) -> None:
        if self.busy is Busy.GENERATING:
            self.show_activity(activity.GENERATING)

    # ----- agent events
    def on_agent_event_message(self, msg: AgentEventMessage) -> None:
        msg.stop()
        if msg.context is not None:  # the turn started: the meter counts the prompt at once
            self.status.set(context_used=msg.context)
        try:
            self.handle_event(msg.event)
        except Exception as exc:  # a rendering bug must not take the session down
            self.error(f"display error: {error_text(exc)}")

    def handle_event(self, e: ev.AgentEvent) -> None:
        """Route one agent event to the widget that shows it."""
        t = self.transcript
        if isinstance(e, ev.BlockText):
            self._model_activity()
            t.stream(e.text, e.kind)
        elif isinstance(e, ev.DenoiseProgress):
            self._model_activity()
            self.denoise.show(e)
        elif isinstance(e, ev.ToolCallProposed):
            t.add_tool(e.call_id, e.name, e.arguments)
            self.show_activity(activity.running(e.name, dict(e.arguments)))
        elif isinstance(e, ev.ApprovalRequested):
            self.show_activity(activity.AWAITING_APPROVAL)
            self.ask_approval(e)
        elif isinstance(e, ev.ToolOutput):
            t.panel(e.call_id, e.name).add_output(e.text)
        elif isinstance(e, ev.ToolFinished):
            t.panel(e.call_id, e.name).finish(e.ok, e.output, e.details)
            self._model_activity()  # the model reads the result next
        elif isinstance(e, ev.Notice):
            t.end_message()
            t.add_notice(e.message)
            if e.message.startswith("Compacted "):
                self.show_summary()
        elif isinstance(e, ev.AgentError):
            t.end_message()
            self.error(e.message)
        elif isinstance(e, ev.TurnFinished):
            self.turn_finished(e)

    def ask_approval(self, request: ev.ApprovalRequested) -> None:
        """Show the approval dialog; its answer goes into the request's future."""
        panel = self.transcript.panel(request.call_id, request.name, request.arguments)
        panel.show_preview(request.summary)
        panel.set_status("approval")

        def answered(answer: ev.ApprovalAnswer | None) -> None:
            self.approval = None
            answer = answer or ev.ApprovalAnswer("no")
            panel.set_status("running" if answer.decision != "no" else "denied")
            self.show_activity(activity.GENERATING if answer.decision == "no"
                               else activity.running(request.name, dict(request.arguments)))
            if not request.future.done():
                request.future.set_result(answer)
            self.prompt.display = True
            self.call_after_refresh(self.refocus_prompt)

        dialog = ApprovalDialog(request, answered)
        self.approval = (request, dialog)
        self.picker.close()
        self.prompt.display = False  # the dialog takes the prompt's place, under the transcript
        self.mount(dialog, before=self.prompt)

    def turn_finished(self, e: ev.TurnFinished) -> None:
        """Close the answer, update speed and context figures, report a non-normal end."""
        t = self.transcript
        t.end_message()
        stats = dict(e.stats or {})
        changes: dict[str, Any] = {}
        measured = measured_model(self.options.model)  # replay / remote: no TPF or speed to show
        if measured and stats.get("tpf") is not None:
            changes["tpf"] = float(stats["tpf"])
        if measured and stats.get("tokens_per_second") is not None:
            changes["tokens_per_second"] = float(stats["tokens_per_second"])
        for key in ("context_tokens", "context_used"):
            if stats.get(key) is not None:
                changes["context_used"] = int(stats[key])
                break
        if stats.get("context_window"):
            changes["context_window"] = int(stats["context_window"])
        changes.update(prefix_figures(stats))
        self.status.set(**changes)
        if e.reason == "cancelled":
            self.stopped_at = time.perf_counter()
            t.add_notice("Interrupted.", "warning")
            self.quit_hint_after_cancel()
        elif e.reason != "done":
            t.add_notice(f"Turn stopped: {e.reason.replace('_', ' ')}.", "warning")
        self._record_perf(stats)

    def _record_perf(self, stats: dict) -> None:
        """UI-thread CPU time during the turn vs its wall time and the process CPU (docs/tui.md)."""
        if self._turn_clock is None:
            return
        wall = time.perf_counter() - self._turn_clock[0]
        ui_cpu = time.thread_time() - self._turn_clock[1]
        all_cpu = time.process_time() - self._turn_clock[2]  # every thread: decode, tools, UI
        self._turn_clock = None
        self.last_perf = {"wall_s": wall, "ui_cpu_s": ui_cpu, "process_cpu_s": all_cpu,
                          "ui_share": ui_cpu / wall if wall > 0 else 0.0,
                          "ui_share_of_cpu": ui_cpu / all_cpu if all_cpu > 0 else 0.0,
                          "tokens": stats.get("tokens") or stats.get("generated_tokens") or 0,
                          "tokens_per_second": stats.get("tokens_per_second") or 0.0}
        path = os.environ.get("CLOVER_TUI_PERF")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(self.last_perf) + "\n")

    def on_task_done(self, msg: TaskDone) -> None:
        msg.stop()
        if msg.kind == "stream":
            if msg.value is not None:
                self.status.set(context_used=msg.value)
            self.transcript.end_message()
            self.transcript.flush()
            self.set_busy(Busy.IDLE)
            self.send_next_queued()
            return
        self.set_busy(Busy.IDLE)
        self.task_done(msg)

    def error(self, message: str) -> None:
        """Show an error as a transcript notice and a toast."""
        self.transcript.add_notice(message, "error")
        self.notify(message, severity="error", timeout=6)

    def show_summary(self) -> None:
        """After a compaction: the summary the model wrote, as its own folded "summary" entry."""
        for m in self.agent.messages if self.agent is not None else []:
            if m.get("role") == "user" and is_summary(m):  # the text the session file holds
                self.transcript.add_summary(m.get("summary") or m.get("content") or "")
                return
