"""Slash command handlers of the chat screen (a mixin: ChatScreen provides the widgets)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from rich.table import Table
from textual import work

from clover_cli.agent.config import APPROVAL_MODES
from clover_cli.tui import slash
from clover_cli.tui.bridge import TaskDone, error_text
from clover_cli.tui.screens.busy import Busy

BUSY_OK = ("help", "denoise", "quit", "threshold", "approval", "copy", "theme")  # commands allowed while generating


class SlashCommands:
    """`/name arg` -> `cmd_name(arg)`; agent calls run in a worker and end in `task_done`."""

    def run_slash(self, text: str) -> None:
        """Parse and run a slash command; mistakes become notices."""
        try:
            cmd = slash.parse(text)
        except slash.SlashError as exc:
            self.error(str(exc))
            return
        if self.busy and cmd.name not in BUSY_OK and not (cmd.name == "model" and not cmd.arg):
            self.notify(f"/{cmd.name} waits until the agent is idle (Ctrl+C interrupts).", severity="warning")
            return
        needs_agent = cmd.name in ("undo", "diff", "clear", "compact", "approval", "sessions")
        if needs_agent and self.agent is None:
            self.error(f"/{cmd.name}: no session yet (the model is not loaded).")
            return
        try:
            getattr(self, f"cmd_{cmd.name}")(cmd.arg)
        except slash.SlashError as exc:
            self.error(str(exc))
        except Exception as exc:  # never a crashed screen
            self.error(f"/{cmd.name} failed: {error_text(exc)}")

    @work(thread=True, group="agent", exit_on_error=False)
    def call_agent(self, kind: str, fn: Callable[[], Any]) -> None:
        """Run a blocking agent call in a worker thread; the result comes back as TaskDone."""
        try:
            self.post_message(TaskDone(kind, fn()))
        except Exception as exc:
            self.post_message(TaskDone(kind, error=error_text(exc)))

    def _start(self, kind: str, fn: Callable[[], Any]) -> None:
        self.set_busy(Busy.WORKING)
        self.call_agent(kind, fn)

    def task_done(self, msg: TaskDone) -> None:
        """Show the result of an agent call."""
        if msg.error:
            self.error(f"/{msg.kind}: {msg.error}")
            return
        t = self.transcript
        if msg.kind == "undo":
            result = msg.value
            ok = getattr(result, "ok", True)
            t.add_notice(getattr(result, "output", str(result)) or "Undone.", "info" if ok else "warning")
        elif msg.kind == "diff":
            diff = msg.value or ""
            if diff.strip():
                t.add_code(diff, "diff")
            else:
                t.add_notice("No changes by the agent in this session.")
        elif msg.kind == "clear":
            t.clear()
            # the system prompt is what is left; the engine's cache is dropped too
            self.status.set(context_used=self.agent.context_tokens(), cached=None, first_block=None)
            t.add_notice("Conversation cleared.")

    # ----- commands
    def cmd_help(self, arg: str) -> None:
        """List commands and keys."""
        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        table.add_column(style="bold")
        table.add_column()
        for usage, help_text in slash.COMMANDS.values():
            table.add_row(usage, help_text)
        table.add_row("", "")
        for key, what in slash.KEYS:
            table.add_row(key, what)
        self.transcript.add_static(table, classes="help")

    def cmd_undo(self, arg: str) -> None:
        self._start("undo", self.agent.undo)

    def cmd_diff(self, arg: str) -> None:
        self._start("diff", self.agent.diff)

    def cmd_clear(self, arg: str) -> None:
        self._start("clear", self.agent.clear)

    def cmd_compact(self, arg: str) -> None:
        self.set_busy(Busy.COMPACTING)
        self.drive(source=self.agent.compact)

    def cmd_model(self, arg: str) -> None:
        """Show the model, or load another one keeping the conversation."""
        if not arg:
            info = self.status.info
            self.transcript.add_notice(
                f"Model {info.model}: block size {info.block_size}, threshold {info.threshold}, "
                f"context window {info.context_window}.")
            return
        self.options_before_switch = self.options
        self.options = _replace(self.options, model=arg)
        written = self.agent is not None and self.agent.session_path.is_file()
        resume = self.agent.session_id if written else None  # nothing sent yet: a new session
        self.query_one("#loading-label").update(f"Loading {arg}…")
        self.load(resume)

    def cmd_threshold(self, arg: str) -> None:
        value = slash.parse_threshold(arg)
        if self.agent is not None:
            value = self.agent.set_threshold(value)
        self.options = _replace(self.options, threshold=value)
        self.status.set(threshold=value)
        self.transcript.add_notice(f"Threshold set to {value:g} (applies from the next block).")

    def cmd_denoise(self, arg: str) -> None:
        self.toggle_denoise()

    def toggle_denoise(self) -> None:
        """Show or hide the live denoise view."""
        view = self.denoise
        view.display = not view.display
        if view.display:
            view.refresh_view()
            if self.agent is not None and (self.status.info.block_size or 1) <= 1:
                self.transcript.add_notice("This model has no denoise steps to show "
                                           "(autoregressive or remote); the view stays empty.")

    def cmd_approval(self, arg: str) -> None:
        mode = arg.strip().lower()
        if mode not in APPROVAL_MODES:
            raise slash.SlashError(f"Usage: /approval MODE with MODE one of {', '.join(APPROVAL_MODES)}")
        self.agent.set_approval(mode)
        self.options = _replace(self.options, approval=mode)
        self.status.set(approval=mode)
        self.transcript.add_notice(f"Approval mode: {mode}.")

    def cmd_sessions(self, arg: str) -> None:
        """List saved sessions, or resume one by id."""
        if arg:
            self.transcript.clear()
            self.load(arg, reuse=self.agent)
            return
        from clover_cli.agent.session import sessions_dir

        folder = sessions_dir(Path(self.options.root))  # wherever the agent keeps them
        files = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)[:15]
        if not files:
            self.transcript.add_notice("No saved sessions yet.")
            return
        table = Table(show_header=True, box=None, padding=(0, 2, 0, 0))
        table.add_column("session")
        table.add_column("last written")
        table.add_column("first prompt")
        current = self.agent.session_id
        for path in files:
            mark = " *" if path.stem == current else ""
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
            table.add_row(path.stem + mark, when, _first_prompt(path))
        self.transcript.add_static(table, classes="help")
        self.transcript.add_notice("Resume one with /sessions ID (or `clover --session ID`).")

    def cmd_copy(self, arg: str) -> None:
        """Copy the last answer (or its Nth code block) with OSC 52; a file is the fallback."""
        from clover_cli.tui import clipboard

        from clover_cli.agent.jsonsafe import scrub

        try:  # a lone surrogate in the model's text would fail both the OSC 52 and the file
            text = scrub(clipboard.pick(self.transcript.last_answer(), arg))
        except ValueError as exc:
            raise slash.SlashError(str(exc)) from None
        self.app.copy_to_clipboard(text)
        what = f"code block {arg.strip()}" if arg.strip() else "the last answer"
        n = text.count("\n") + (0 if text.endswith("\n") else 1)
        fallback = ""
        try:
            from clover_cli.agent.interface import state_file
            path = state_file(self.options.root, "copied.txt")
            path.write_text(text, encoding="utf-8")
            fallback = f" If your terminal ignores OSC 52, the text is also in {path}"
        except OSError:
            pass
        self.transcript.add_notice(f"Copied {what} ({n} line{'' if n == 1 else 's'}) to the clipboard "
                                   f"(OSC 52).{fallback}")

    def cmd_theme(self, arg: str) -> None:
        """List the themes, or switch to one (remembered in tui.json)."""
        from clover_cli.tui.prefs import THEME_ALIASES, save_pref

        themes = sorted(self.app.available_themes)
        name = THEME_ALIASES.get(arg.strip().lower(), arg.strip())
        if not name:
            self.transcript.add_notice(f"Theme {self.app.theme}. Available: light, dark, "
                                       + ", ".join(themes) + ". Use /theme NAME.")
            return
        if name not in themes:
            raise slash.SlashError(f"Unknown theme {arg.strip()!r}; /theme lists them.")
        self.app.theme = name
        self.status.redraw()
        problem = save_pref("theme", name)
        if problem:
            self.error(f"Theme {name} set for this session only: {problem}")
        else:
            self.transcript.add_notice(f"Theme {name} (remembered).")

    def cmd_quit(self, arg: str) -> None:
        self.quit()


def _replace(options, **changes):
    from dataclasses import replace
    return replace(options, **changes)


def _first_prompt(path: Path, width: int = 40) -> str:
    """The first user message of a session file (for the list), shortened."""
    import json
    try:
        with open(path, encoding="utf-8", errors="replace") as f:  # a damaged line is no crash
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                msg = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "message" else None
                if isinstance(msg, dict) and msg.get("role") == "user":
                    text = " ".join(str(msg.get("content", "")).split())
                    return text if len(text) <= width else text[: width - 1] + "…"
    except OSError:
        pass
    return ""
