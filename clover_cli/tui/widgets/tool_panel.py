"""A tool call in the transcript: name, argument summary, status and folded output."""
from __future__ import annotations

import json
from typing import Any, Mapping

from rich.markup import escape
from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from clover_cli.tui.textfilter import visible_controls
from clover_cli.tui.widgets.messages import plural

MAX_OUTPUT_CHARS = 20_000
LIVE_LINES = 6  # a running tool shows the last lines of its output as they come
STATUS_TEXT = {
    "proposed": "…",
    "approval": "awaiting approval",
    "running": "running",
    "ok": "✓ done",
    "failed": "✗ failed",
    "denied": "✗ denied",
}


def summarize_args(name: str, arguments: Mapping[str, Any], width: int = 60) -> str:
    """A one-line summary of a call's arguments (the path or command first)."""
    if name in ("edit_file", "write_file") and "path" in arguments:
        text = str(arguments["path"]) + (" (all)" if arguments.get("replace_all") else "")
    elif name == "apply_patch" and isinstance(arguments.get("patch"), str):
        files = [ln[6:] for ln in arguments["patch"].splitlines() if ln.startswith("+++ b/")]
        text = ", ".join(files) or "(patch)"
    else:
        parts = []
        for key in ("command", "path", "pattern", "paths"):
            if key in arguments:
                parts.append(str(arguments[key]) if key in ("command", "path") else f"{key}={arguments[key]}")
        for key, value in arguments.items():
            if key in ("command", "path", "pattern", "paths"):
                continue
            shown = value if isinstance(value, (int, float, bool)) else json.dumps(value, ensure_ascii=False)
            parts.append(f"{key}={shown}")
        text = " ".join(parts)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def args_preview(name: str, arguments: Mapping[str, Any]) -> str:
    """What a writing call changes, from its own arguments (shown when no approval preview exists)."""
    if name == "apply_patch" and isinstance(arguments.get("patch"), str):
        return arguments["patch"]
    if name == "edit_file" and isinstance(arguments.get("old"), str) and isinstance(arguments.get("new"), str):
        path = arguments.get("path", "")
        minus = "".join(f"-{line}\n" for line in arguments["old"].splitlines())
        plus = "".join(f"+{line}\n" for line in arguments["new"].splitlines())
        return f"--- a/{path}\n+++ b/{path}\n@@ edit @@\n{minus}{plus}"
    return ""


def looks_like_diff(text: str) -> bool:
    """True when `text` is a unified diff."""
    return any(line.startswith(("--- ", "+++ ", "@@ ")) for line in text.splitlines()[:20])


def code_view(text: str, lexer: str | None = None) -> Syntax:
    """A syntax-highlighted renderable: diffs as `diff`, everything else as given or plain text."""
    if lexer is None:
        lexer = "diff" if looks_like_diff(text) else "text"
    return Syntax(text, lexer, theme="ansi_dark", word_wrap=True, background_color="default")


class ToolPanel(Vertical):
    """One tool call; `set_status`, `add_output` and `finish` update it as events arrive."""

    def __init__(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> None:
        super().__init__(classes="tool-panel")
        self.call_id = call_id
        self.tool_name = name
        self.arguments = dict(arguments)
        self.status = "proposed"
        self.output = ""
        self.preview = args_preview(name, arguments)
        self._header = Static(self._header_text(), classes="tool-header")
        self._body = Static("", classes="tool-output")
        self._fold = Collapsible(self._body, title="output", collapsed=True, classes="tool-fold")
        self._fold.display = False  # shown once there is a preview or output
        self._live = Static("", classes="tool-live", markup=False)
        self._live.display = False  # the running tool's last lines

    def compose(self) -> ComposeResult:
        yield self._header
        yield self._live
        yield self._fold

    def _header_text(self) -> str:
        args = escape(summarize_args(self.tool_name, self.arguments))
        return f"[b]⚙ {escape(self.tool_name)}[/b] {args}  [dim]{STATUS_TEXT.get(self.status, self.status)}[/dim]"

    def set_status(self, status: str) -> None:
        """Change the status shown in the header."""
        self.status = status
        self.set_class(status == "failed" or status == "denied", "-failed")
        self._header.update(self._header_text())

    def show_preview(self, summary: str) -> None:
        """Show the diff or command the approval was asked for."""
        self.preview = summary
        self._body.update(code_view(summary))
        self._fold.title = "diff" if looks_like_diff(summary) else "command"
        self._fold.display = True

    def add_output(self, text: str) -> None:
        """Append live output of a running tool (kept to the last MAX_OUTPUT_CHARS); the last
        LIVE_LINES lines show under the header while it runs."""
        self.output = (self.output + text)[-MAX_OUTPUT_CHARS:]
        lines = self.output.rstrip("\n").splitlines()[-LIVE_LINES:]
        self._live.update(visible_controls("\n".join(lines)))
        self._live.display = bool(lines)

    def finish(self, ok: bool, output: str, details: Mapping[str, Any] | None = None) -> None:
        """Final status and output; failures unfold so the user sees why."""
        details = details or {}
        denied = not ok and details.get("error") in ("denied", "refused", "rejected")
        self.set_status("ok" if ok else ("denied" if denied else "failed"))
        self.output = output[-MAX_OUTPUT_CHARS:]
        shown = self.preview if (ok and self.preview and looks_like_diff(self.preview)) else self.output
        lines = len(self.output.splitlines())
        self._live.display = False
        if shown:
            self._body.update(code_view(shown))
            self._fold.title = "diff" if shown is self.preview else f"output ({lines} {plural(lines, 'line')})"
            self._fold.display = True
        if not ok:
            self._fold.collapsed = False
