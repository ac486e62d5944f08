"""The Clover Textual app: wires the chat screen and the global key bindings, nothing more.

Behaviour lives in `screens/` and `widgets/`; styles in `clover.tcss`.
"""
from __future__ import annotations

from textual.app import App
from textual.binding import Binding

from clover_cli.tui.bridge import SessionOptions
from clover_cli.tui.prefs import load_prefs
from clover_cli.tui.screens.chat import ChatScreen


class CloverApp(App):
    """`clover` in the terminal. `run()` returns {"session_id", "session_path"} or None."""

    CSS_PATH = "clover.tcss"
    TITLE = "clover"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Interrupt", priority=True, show=False),
        Binding("ctrl+q", "quit_session", "Quit", priority=True, show=False),
        Binding("ctrl+t", "toggle_denoise", "Denoise view", show=False),
    ]

    def __init__(self, options: SessionOptions) -> None:
        super().__init__()
        self.options = options
        self.chat = ChatScreen(options)
        theme = load_prefs().get("theme")
        if isinstance(theme, str) and theme in self.available_themes:
            self.theme = theme  # /theme remembers it in tui.json (an unknown name is ignored)

    def on_mount(self) -> None:
        self.push_screen(self.chat)

    def action_interrupt(self) -> None:
        """Ctrl+C anywhere: interrupt (an open approval is answered "no"); twice quits."""
        self.chat.interrupt()

    def action_quit_session(self) -> None:
        """Ctrl+Q: quit like /quit."""
        self.chat.quit()

    def action_toggle_denoise(self) -> None:
        """Ctrl+T: show or hide the denoise view."""
        if self.chat.approval is None:
            self.chat.toggle_denoise()
