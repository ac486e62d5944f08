"""The main screen: transcript, denoise view, prompt and status bar, driven by agent events."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Label, LoadingIndicator, Static, TextArea

from clover_cli.agent import events as ev
from clover_cli.tui import slash
from clover_cli.tui.bridge import (AgentEventMessage, AgentFailed, AgentReady, SessionOptions, TaskDone,
                                   context_tokens, error_text, git_branch, open_agent)
from clover_cli.tui.screens.approval import ApprovalScreen
from clover_cli.tui.screens.commands import SlashCommands
from clover_cli.tui.widgets.denoise import DenoiseView
from clover_cli.tui.widgets.prompt_input import PromptInput
from clover_cli.tui.widgets.status_bar import StatusBar
from clover_cli.tui.widgets.transcript import Transcript

FRAME_SECONDS = 1 / 10  # render at most 10 frames per second while streaming (each may relayout)
RENDER_BUDGET = 0.05  # share of the UI thread's time that drawing may take (docs/tui.md)
MAX_FRAME_GAP = 1.0  # but text never waits longer than this
QUIT_WINDOW_SECONDS = 3.0  # a second Ctrl+C within this window quits


class ChatScreen(SlashCommands, Screen):
    """Wires agent events to widgets; long agent calls run in thread workers."""

    def __init__(self, options: SessionOptions) -> None:
        super().__init__(id="chat")
        self.options = options
        self.agent: Any = None
        self.busy = ""  # "", "loading", "generating", "compacting", "working"
        self.queued: list[str] = []  # prompts typed while the model was loading
        self.approval: tuple[ev.ApprovalRequested, ApprovalScreen] | None = None
        self.last_perf: dict[str, float] = {}
        self.options_before_switch: SessionOptions | None = None  # restored if /model fails
        self._quit_armed_until = 0.0
        self._turn_clock: tuple[float, float, float] | None = None
        self._last_draw: tuple[float, float] | None = None  # (wall, UI CPU) at the last drawn frame
        self._widgets: dict[type, Any] = {}

    # ----- layout
    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        with Horizontal(id="loading"):
            yield LoadingIndicator()
            yield Label(f"Loading model {self.options.model}…", id="loading-label")
        yield DenoiseView()
        yield Static("", id="completions")
        yield PromptInput(id="prompt")
        yield StatusBar()

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
        self.status.set(model=self.options.model, approval=self.options.approval,
                        threshold=self.options.threshold)
        self.query_one(PromptInput).focus()
        self.set_interval(FRAME_SECONDS, self._frame)
        self.load(self.options.resume)

    def _frame(self) -> None:
        """One render frame: flush buffered text and the denoise state, within the render budget.

        A frame is skipped (its text waits, coalesced) while the UI thread has used more than
        RENDER_BUDGET of the time since the last drawn frame (and less than MAX_FRAME_GAP has
        passed): on a slow machine the frame rate drops instead of the decoder losing time.
        """
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

    # ----- loading
    def load(self, resume: str | None, backend: Any = None) -> None:
        """Start loading the model (or reopening a session) in a worker thread."""
        self.set_busy("loading")
        self.query_one("#loading").display = True
        self.status.set(loading=True)
        self._load_worker(resume, backend)

    @work(thread=True, group="agent", exit_on_error=False)
    def _load_worker(self, resume: str | None, backend: Any) -> None:
        try:
            agent, resumed, note = open_agent(self.options, resume, backend)
            info = {**agent.backend.info, "context_used": context_tokens(agent)}
            self.post_message(AgentReady(agent, info, git_branch(self.options.root), resumed, note))
        except Exception as exc:  # every failure becomes a notice, never a crash
            self.post_message(AgentFailed(error_text(exc)))

    def on_agent_ready(self, msg: AgentReady) -> None:
        if self.agent is not None and self.agent is not msg.agent:
            self._close_agent(self.agent, keep_backend=getattr(msg.agent, "backend", None))
        first = self.agent is None
        self.agent = msg.agent
        self.options_before_switch = None
        info = msg.info
        self.query_one("#loading").display = False
        in_process = not str(self.options.model).startswith(("replay:", "openai:"))
        self.status.set(model=info.get("name", self.options.model), loading=False,
                        block_size=info.get("block_size") if in_process else None, threshold=info.get("threshold"),
                        context_window=info.get("context_window"), branch=msg.branch,
                        context_used=info.get("context_used"),
                        approval=getattr(getattr(msg.agent, "config", None), "approval", self.options.approval))
        self.set_busy("")
        if msg.resumed:
            self.show_history(getattr(msg.agent, "messages", []))
            self.transcript.add_notice(f"Resumed session {msg.agent.session_id}")
        elif first:
            self.transcript.add_notice(f"Clover in {self.options.root.name or self.options.root}. "
                                       "Type a request (Enter sends); /help lists commands.")
        if msg.note:
            self.transcript.add_notice(msg.note, "warning")
        while self.queued and not self.busy:
            self.send(self.queued.pop(0), show=False)  # shown when it was typed

    def on_agent_failed(self, msg: AgentFailed) -> None:
        self.query_one("#loading").display = False
        self.status.set(loading=False)
        if self.agent is not None:  # a failed switch keeps the model that was loaded
            self.options = self.options_before_switch or self.options
            self.status.set(model=self.agent.backend.info.get("name", ""))
        self.options_before_switch = None
        self.set_busy("")
        self.queued.clear()
        self.error(msg.message)

    @staticmethod
    def _close_agent(agent: Any, keep_backend: Any = None) -> None:
        backend = getattr(agent, "backend", None)
        if backend is not None and backend is not keep_backend:
            try:
                backend.close()
            except Exception:
                pass

    def show_history(self, messages: list[dict]) -> None:
        """Render a resumed conversation (user prompts and assistant answers)."""
        t = self.transcript
        for m in messages:
            role, content = m.get("role"), m.get("content") or ""
            if role == "user":
                t.add_user(content)
            elif role == "assistant" and content.strip():
                t.stream(content)
                t.end_message()
            elif role == "tool":
                t.add_notice(f"tool result ({m.get('name', 'tool')}, {len(content.splitlines())} lines)")

    # ----- sending
    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        text = event.text_area.text
        hint = self.query_one("#completions", Static)
        matches = slash.complete(text) if text.startswith("/") else []
        hint.display = bool(matches)
        if matches:
            hint.update("  ".join(f"{slash.COMMANDS[m[1:]][0]}" for m in matches))

    def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        event.stop()
        text = event.text
        self._quit_armed_until = 0.0
        if slash.is_slash(text):
            self.run_slash(text)
        elif self.busy == "loading":
            self.queued.append(text)
            self.transcript.add_user(text)
            self.transcript.add_notice("Will send when the model is loaded.")
        elif self.busy:
            self.notify("Still working — Ctrl+C interrupts.", severity="warning")
            self.query_one(PromptInput).load_text(text)
        elif self.agent is None:
            self.error("No model is loaded; use /model SPEC to load one.")
        else:
            self.send(text)

    def send(self, text: str, show: bool = True) -> None:
        """Start a turn with `text` in a worker thread."""
        if show:
            self.transcript.add_user(text)
        self.set_busy("generating")
        self._turn_clock = (time.perf_counter(), time.thread_time(), time.process_time())
        self.stream_events(lambda: self.agent.run_turn(text))

    @work(thread=True, group="agent", exit_on_error=False)
    def stream_events(self, start) -> None:
        """Run an agent generator (turn or compaction) and post each event to the UI."""
        try:
            for event in start():
                self.post_message(AgentEventMessage(event))
        except Exception as exc:
            self.post_message(AgentEventMessage(ev.AgentError(error_text(exc))))
        self.post_message(TaskDone("stream", context_tokens(self.agent)))

    def set_busy(self, busy: str) -> None:
        """Record what is running and show it in the status bar."""
        self.busy = busy
        self.status.set(busy="" if busy == "loading" else busy)
        if not busy:
            self.denoise.clear()

    # ----- agent events
    def on_agent_event_message(self, msg: AgentEventMessage) -> None:
        msg.stop()
        try:
            self.handle_event(msg.event)
        except Exception as exc:  # a rendering bug must not take the session down
            self.error(f"display error: {error_text(exc)}")

    def handle_event(self, e: Any) -> None:
        """Route one agent event to the widget that shows it."""
        t = self.transcript
        if isinstance(e, ev.BlockText):
            t.stream(e.text, e.thinking)
        elif isinstance(e, ev.DenoiseProgress):
            self.denoise.show(e)
        elif isinstance(e, ev.ToolCallProposed):
            t.add_tool(e.call_id, e.name, e.arguments)
        elif isinstance(e, ev.ApprovalRequested):
            self.ask_approval(e)
        elif isinstance(e, ev.ToolOutput):
            t.panel(e.call_id, e.name).add_output(e.text)
        elif isinstance(e, ev.ToolFinished):
            t.panel(e.call_id, e.name).finish(e.ok, e.output, e.details)
        elif isinstance(e, ev.Notice):
            t.end_message()
            t.add_notice(e.message)
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
        screen = ApprovalScreen(request)
        self.approval = (request, screen)

        def answered(answer: ev.ApprovalAnswer | None) -> None:
            self.approval = None
            answer = answer or ev.ApprovalAnswer("no")
            panel.set_status("running" if answer.decision != "no" else "denied")
            if not request.future.done():
                request.future.set_result(answer)

        self.app.push_screen(screen, answered)

    def turn_finished(self, e: ev.TurnFinished) -> None:
        """Close the answer, update speed and context figures, report a non-normal end."""
        t = self.transcript
        t.end_message()
        stats = dict(e.stats or {})
        changes: dict[str, Any] = {}
        if stats.get("tpf") is not None:
            changes["tpf"] = float(stats["tpf"])
        if stats.get("tokens_per_second") is not None:
            changes["tokens_per_second"] = float(stats["tokens_per_second"])
        for key in ("context_tokens", "context_used"):
            if stats.get(key) is not None:
                changes["context_used"] = int(stats[key])
                break
        if stats.get("context_window"):
            changes["context_window"] = int(stats["context_window"])
        self.status.set(**changes)
        if e.reason == "cancelled":
            t.add_notice("Interrupted.", "warning")
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
            self.set_busy("")
            return
        self.set_busy("")
        self.task_done(msg)

    def error(self, message: str) -> None:
        """Show an error as a transcript notice and a toast."""
        self.transcript.add_notice(message, "error")
        self.notify(message, severity="error", timeout=6)

    # ----- interrupt / quit
    def interrupt(self) -> None:
        """Ctrl+C: cancel generation (or a pending approval); a second Ctrl+C quits."""
        now = time.monotonic()
        if now < self._quit_armed_until:
            self.quit()
            return
        self._quit_armed_until = now + QUIT_WINDOW_SECONDS
        if self.approval is not None:
            request, screen = self.approval
            screen.dismiss(ev.ApprovalAnswer("no", "Interrupted by the user."))
        if self.busy in ("generating", "compacting") and self.agent is not None:
            self.agent.cancel()
            self.notify("Interrupting… (Ctrl+C again to quit)", timeout=QUIT_WINDOW_SECONDS)
        else:
            self.notify("Press Ctrl+C again to quit.", timeout=QUIT_WINDOW_SECONDS)

    def stop_agent(self) -> None:
        """Cancel a running turn and answer a pending approval, so worker threads can end."""
        if self.approval is not None and not self.approval[0].future.done():
            self.approval[0].future.set_result(ev.ApprovalAnswer("no", "The user quit."))
        if self.agent is not None and self.busy:
            self.agent.cancel()

    def on_unmount(self) -> None:
        self.stop_agent()

    def quit(self) -> None:
        """Stop any generation and exit; the session file is already written."""
        self.stop_agent()
        agent = self.agent
        info = None
        if agent is not None:
            info = {"session_id": getattr(agent, "session_id", None),
                    "session_path": str(getattr(agent, "session_path", "") or "")}
        self.app.exit(info)
