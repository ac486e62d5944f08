"""How a file name is shown to the model and the user (docs/tools.md, "File names"): a name with a
newline, a tab, an escape sequence or any other unprintable character is shown the way Python's
repr() writes it (`'a\\nb.txt'`), so it can never pose as a second entry of a listing or reach a
terminal as a control sequence; every other name is shown as it is."""
from __future__ import annotations


def show_path(rel: str) -> str:
    return rel if rel.isprintable() else repr(rel)
