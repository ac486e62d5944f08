"""The live denoise view: the block being decoded, masked positions shown as placeholders."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from clover_cli.tui.textfilter import visible_controls

MASK = "░"


def render_block(pieces: tuple[str, ...], masked: tuple[bool, ...], mask_char: str = MASK) -> str:
    """The block's text with one `mask_char` per still-masked position."""
    return "".join(mask_char if m else p for p, m in zip(pieces, masked))


class DenoiseView(Static):
    """Shows the latest DenoiseProgress; `show` only stores it, `refresh_view` draws it.

    The view has a fixed height so a redraw never relayouts the screen (the cost that matters
    at 15 frames per second); a block longer than the view is clipped.
    """

    def __init__(self) -> None:
        super().__init__("", classes="denoise")
        self.border_title = "denoise"
        self._latest = None
        self._drawn = None

    def show(self, progress) -> None:
        """Remember the newest progress event (cheap; drawing happens at frame rate)."""
        self._latest = progress

    @property
    def pending(self) -> bool:
        """True when a newer step waits to be drawn in the visible view."""
        return self.display and self._latest is not None and self._latest is not self._drawn

    def clear(self) -> None:
        """Forget the current block (turn ended)."""
        self._latest = None
        self._drawn = None
        self.border_title = "denoise"  # the title named the last block's index and step
        self.update(Text("waiting for the next block…", style="dim"), layout=False)

    def refresh_view(self) -> None:
        """Draw the newest progress if it changed and the view is visible."""
        ev = self._latest
        if ev is None or ev is self._drawn or not self.display:
            return
        self._drawn = ev
        done = sum(1 for m in ev.masked if not m)
        self.border_title = f"denoise · block {ev.block_index} · step {ev.step} · {done}/{len(ev.masked)}"
        text = Text()
        for piece, m in zip(ev.pieces, ev.masked):
            if m:
                text.append(MASK, style="dim")
            else:
                text.append(visible_controls(piece))
        self.update(text, layout=False)  # fixed height (clover.tcss): repaint only, no relayout
