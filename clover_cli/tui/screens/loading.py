"""Loading the model (or reopening a session) in a worker thread: a mixin of ChatScreen.

The screen is usable at once; the progress line shows the elapsed time and how many typed
messages are queued; the first of them is sent when the model is ready (docs/tui.md, "Startup").
"""
from __future__ import annotations

import threading
import time

from textual.widgets import Label

from clover_cli.agent.attachments import strip_attachments
from clover_cli.agent.demo import demo_notice
from clover_cli.agent.interface import AgentSession
from clover_cli.agent.markup import split_message
from clover_cli.tui.bridge import AgentFailed, AgentReady, error_text, measured_model, open_agent
from clover_cli.tui.screens.busy import Busy
from clover_cli.tui.widgets.messages import is_summary, plural
from clover_cli.tui.widgets.status_bar import short_model_name


class ModelLoading:
    """Mixed into ChatScreen (which provides the widgets, `busy`, `queued` and `send`).

    The load runs on a daemon thread of its own, not a Textual worker: quitting never waits for
    it (a Textual thread worker runs in asyncio's default executor, which `App.run` joins on the
    way out: a smollm2 conversion kept a quit waiting for a minute). `load_pending` tells
    `clover chat` to end the process at once instead (commands/chat_cmd.py)."""

    _load_thread: threading.Thread | None = None

    @property
    def load_pending(self) -> bool:
        """True while a load (or reopen) is still running on its thread."""
        return self._load_thread is not None and self._load_thread.is_alive()

    def load(self, resume: str | None, reuse: AgentSession | None = None) -> None:
        """Start loading the model (or reopening a session on `reuse`'s model) in a worker thread."""
        self.set_busy(Busy.LOADING)
        self.query_one("#loading").display = True
        self.status.set(loading=True)
        self._load_started = time.monotonic()
        self._loading_progress()
        self._load_thread = threading.Thread(target=self._load_worker, args=(resume, reuse),
                                             name="clover-load", daemon=True)
        self._load_thread.start()

    def _loading_progress(self) -> None:
        """The progress line while the model loads: elapsed time and what waits for it."""
        if self.busy is not Busy.LOADING:
            return
        n = len(self.queued)
        waiting = f" · {n} queued message{'s' if n != 1 else ''}, sent when ready" if n else " · type away"
        spin = "◐◓◑◒"[int(time.monotonic() * 2) % 4]
        self.query_one("#loading-label", Label).update(
            f"{spin} Loading {short_model_name(self.options.model)}… "
            f"{time.monotonic() - self._load_started:.0f}s{waiting}")

    def _load_worker(self, resume: str | None, reuse: AgentSession | None) -> None:
        try:
            agent, resumed, note = open_agent(self.options, resume, reuse)
            info = {**agent.model_info(), "context_used": agent.context_tokens()}
            message = AgentReady(agent, info, agent.repo_branch(), resumed, note)
        except Exception as exc:  # every failure becomes a notice, never a crash
            message = AgentFailed(error_text(exc))
        try:
            self.post_message(message)
        except RuntimeError:  # the app closed while the model loaded (its loop is gone): no one to tell
            pass

    def on_agent_ready(self, msg: AgentReady) -> None:
        if self.agent is not None and self.agent is not msg.agent:
            self.agent.close(successor=msg.agent)  # the model stays loaded when both share it
        first = self.agent is None
        switched = not first and self.options_before_switch is not None  # /model SPEC
        self.agent = msg.agent
        self.options_before_switch = None
        info = msg.info
        self.query_one("#loading").display = False
        in_process = measured_model(self.options.model)
        self.status.set(model=info.get("name", self.options.model), loading=False,
                        block_size=info.get("block_size") if in_process else None, threshold=info.get("threshold"),
                        context_window=info.get("context_window"), branch=msg.branch,
                        context_used=info.get("context_used"), cached=None, first_block=None,
                        tpf=None, tokens_per_second=None,  # the previous model's figures are not this one's
                        approval=msg.agent.approval, mode=info.get("mode") or "",
                        placement=info.get("placement") or "")
        self.set_busy(Busy.IDLE)
        if switched:  # the transcript already shows the conversation
            self.transcript.add_notice(f"Switched to {short_model_name(self.options.model)}; "  # the spec typed
                                       "the conversation goes on.")
        elif msg.resumed:
            self.show_history(msg.agent.messages)
            self.transcript.add_notice(f"Resumed session {msg.agent.session_id}")
        elif first and self.options.resume:
            self.welcome()  # a new session after all (--continue found none)
        if msg.note:
            self.transcript.add_notice(msg.note, "warning")
        demo = demo_notice(self.options.model)  # the bundled `tiny`: say how to pick a real model
        if demo:
            self.transcript.add_notice(demo)
        self.send_next_queued()

    def on_agent_failed(self, msg: AgentFailed) -> None:
        self.query_one("#loading").display = False
        self.status.set(loading=False)
        if self.agent is not None:  # a failed switch keeps the model that was loaded
            self.options = self.options_before_switch or self.options
            self.status.set(model=self.agent.model_info().get("name", ""))
        self.options_before_switch = None
        self.set_busy(Busy.IDLE)
        self.drop_queued("the model did not load")
        self.error(msg.message)

    def welcome(self) -> None:
        """The first line of a new session (shown at once, before the model is ready)."""
        self.transcript.add_notice(f"Clover in {self.options.root.name or self.options.root}. "
                                   "Type a request (Enter sends); /help lists commands.")

    def send_next_queued(self) -> None:
        """Send the oldest message typed while loading (the rest follow, one turn after another)."""
        if self.queued and not self.busy and self.agent is not None:
            text, shown = self.queued.pop(0)
            shown.set_queued(False)
            self.send(text, show=False)  # shown when it was typed

    def drop_queued(self, why: str) -> None:
        """Forget the queued messages, marking each as not sent."""
        for _, shown in self.queued:
            shown.set_queued(False, f"not sent: {why}")
        self.queued.clear()

    def show_history(self, messages: list[dict]) -> None:
        """Render a resumed conversation (user prompts and assistant answers)."""
        t = self.transcript
        for m in messages:
            role, content = m.get("role"), m.get("content") or ""
            if role == "user" and is_summary(m):
                t.add_summary(m.get("summary") or content)
                typed = content[len(m["summary"]):].strip() if m.get("summary") else ""
                if typed:  # the summary was put in front of the user's next message
                    t.add_user(strip_attachments(typed))
            elif role == "user":
                t.add_user(strip_attachments(content))
            elif role == "assistant" and content.strip():  # a call that ran shows as its result
                for piece, kind in split_message(content, called=bool(m.get("tool_calls"))):
                    t.stream(piece, kind)
                t.end_message()
            elif role == "tool":
                n = len(content.splitlines())
                t.add_notice(f"tool result ({m.get('name', 'tool')}, {n} {plural(n, 'line')})")

