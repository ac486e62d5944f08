"""Turn ranked definitions into the map text, fitted to a token budget."""
from __future__ import annotations

CHARS_PER_TOKEN = 4  # the tools layer has no tokenizer; ~4 characters per token for code


def estimate_tokens(text: str) -> int:
    """Rough token count of `text`."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def render(items: list[tuple[str, int, str, int, str]], file_order: dict[str, float]) -> str:
    """Render (file, line, text, parent_line, parent_text) items, best first, grouped by file.

    Files appear in the order of their best item (ties by `file_order`, the file rank),
    definitions in line order; a method's class line is shown for context; `⋮` marks gaps.
    """
    by_file: dict[str, dict[int, str]] = {}
    for rel, line, text, parent_line, parent_text in items:
        rows = by_file.setdefault(rel, {})
        rows[line] = text
        if parent_line and parent_line not in rows:
            rows[parent_line] = parent_text
    out = []
    first = {}
    for k, item in enumerate(items):
        first.setdefault(item[0], k)
    for rel in sorted(by_file, key=lambda r: (first[r], -file_order.get(r, 0.0), r)):
        out.append(f"{rel}:")
        prev = 0
        for line in sorted(by_file[rel]):
            if prev and line > prev + 1:
                out.append("      ⋮")
            out.append(f"{line:5d}│{by_file[rel][line]}")
            prev = line
        out.append("")
    return "\n".join(out)


def fit(items: list, file_order: dict[str, float], budget_tokens: int) -> tuple[str, int]:
    """The longest prefix of `items` (best first) whose rendering fits the budget."""
    lo, hi = 0, min(len(items), budget_tokens // 3 + 10)
    best = ""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        text = render(items[:mid], file_order)
        if estimate_tokens(text) <= budget_tokens:
            lo, best = mid, text
        else:
            hi = mid - 1
    if lo and not best:
        best = render(items[:lo], file_order)
    return best, lo
