"""Read what a running Textual app shows, as plain text (for assertions in tests and scripts)."""
from __future__ import annotations


def screen_text(app) -> str:
    """The visible screen (top screen, including modals and, through a transparent modal, the
    screens below it) as lines of plain text."""
    from textual._context import visible_screen_stack

    visible_screen_stack.set(list(app._background_screens))
    update = app.screen._compositor.render_full_update(simplify=True)
    return "\n".join("".join(strip.text for strip in strips).rstrip() for strips in update.strips)
