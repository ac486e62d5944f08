"""The status line: model, block size, threshold, speed, context use (and, for the in-process
engine, how much of the last prompt came from its prefix cache and the time to the first
committed block), approval mode, branch."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import PurePath

from rich.text import Text
from textual.widgets import Static

WARN_AT = 0.80  # the context meter turns amber (the window is filling up) ...
FULL_AT = 0.95  # ... and red (compaction or a cut is near)


def short_model_name(name: str) -> str:
    """Shorten path-like specs (`replay:/tmp/x/s.json` -> `replay:s.json`, `/a/b/ckpt` -> `ckpt`)."""
    prefix, sep, rest = name.partition(":")
    if sep and prefix in ("replay",):
        return f"{prefix}:{PurePath(rest).name}"
    if "/" in name and not sep:
        return PurePath(name).name or name
    return name


DROP_ORDER = ("threshold", "first_block", "speed", "cached", "block", "branch", "placement", "mode", "context",
              "tpf")


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


@dataclass(frozen=True)
class StatusInfo:
    """Everything the status bar shows; unknown values are None."""

    model: str = ""
    loading: bool = False
    block_size: int | None = None
    threshold: float | None = None
    tpf: float | None = None
    tokens_per_second: float | None = None
    context_used: int | None = None
    context_window: int | None = None
    cached: int | None = None  # prompt tokens of the last model call reused from the engine's cache
    first_block: float | None = None  # seconds from the last model call's start to its first block
    approval: str = "ask"
    branch: str | None = None
    busy: str = ""  # "generating", "compacting", ...
    mode: str = ""  # the decoding mode when the model has several, e.g. "dual cache (approx)"
    placement: str = ""  # where an in-process model runs: "cuda:0 · bfloat16", "cpu · float32 · int8"
    extra: dict = field(default_factory=dict)

    def fields(self) -> list[tuple[str, str]]:
        """(key, text) pairs in display order."""
        name = short_model_name(self.model)
        if len(name) > 28:
            name = name[:27] + "…"
        out = [("model", name + (" (loading…)" if self.loading else ""))]
        if self.placement:
            out.append(("placement", self.placement))
        if self.block_size is not None:
            out.append(("block", f"block {self.block_size}" if self.block_size > 1 else "AR"))
        if self.mode:
            out.append(("mode", self.mode))
        if self.threshold is not None and (self.block_size or 0) > 1:
            out.append(("threshold", f"thr {self.threshold:g}"))
        if self.tpf:
            out.append(("tpf", f"TPF {self.tpf:.2f}"))
        if self.tokens_per_second:
            out.append(("speed", f"{self.tokens_per_second:.1f} tok/s"))
        if self.context_window:
            out.append(("context", f"ctx {_k(self.context_used or 0)}/{_k(self.context_window)}"))
        if self.cached is not None:
            out.append(("cached", f"{_k(self.cached)} cached"))
        if self.first_block is not None:
            out.append(("first_block", f"1st block {self.first_block:.2f}s"))
        out.append(("approval", self.approval))
        if self.branch:
            out.append(("branch", f"⎇ {self.branch}"))
        if self.busy:
            out.append(("busy", self.busy))
        return out

    def context_level(self) -> str:
        """"ok", "warn" (>= 80% of the window used) or "full" (>= 95%); "ok" when unknown."""
        if not self.context_window or self.context_used is None:
            return "ok"
        share = self.context_used / self.context_window
        return "full" if share >= FULL_AT else "warn" if share >= WARN_AT else "ok"

    def text(self, width: int = 0) -> str:
        """The rendered line; with `width`, the least useful fields are dropped until it fits."""
        return " · ".join(text for _, text in self.fitted(width))

    def fitted(self, width: int = 0) -> list[tuple[str, str]]:
        """The fields that fit in `width` (all with 0)."""
        fields = self.fields()
        line = " · ".join(text for _, text in fields)
        for key in DROP_ORDER:
            if not width or len(line) <= width:
                break
            fields = [f for f in fields if f[0] != key]
            line = " · ".join(text for _, text in fields)
        return fields


class StatusBar(Static):
    """One line at the bottom; `set(**changes)` updates fields and redraws."""

    def __init__(self) -> None:
        super().__init__("", classes="status-bar", markup=False)
        self.info = StatusInfo()

    def set(self, **changes) -> None:
        """Update some fields of the status and redraw."""
        self.info = replace(self.info, **changes)
        self._draw()

    def _draw(self) -> None:
        width = self.content_region.width if self.is_mounted else 0
        self.update(self.rendered(width), layout=False)  # always one line

    def context_style(self) -> str:
        """The meter's style: the theme's warning colour at 80%, its error colour at 95%."""
        level = self.info.context_level()
        if level == "ok" or not self.is_mounted:
            return ""
        colours = self.app.get_css_variables()
        colour = colours.get("warning" if level == "warn" else "error", "yellow" if level == "warn" else "red")
        return f"bold {colour}"

    def rendered(self, width: int = 0) -> Text:
        """The line as Rich Text, the context meter coloured by how full the window is."""
        out = Text()
        for i, (key, text) in enumerate(self.info.fitted(width)):
            if i:
                out.append(" · ")
            out.append(text, style=self.context_style() if key == "context" else "")
        return out

    def on_resize(self) -> None:
        self._draw()

    def redraw(self) -> None:
        """Draw again (after a theme change: the meter's colours come from the theme)."""
        self._draw()


def prefix_figures(stats: dict) -> dict:
    """`cached` and `first_block` for the status bar from a turn's stats: the last model call's
    reused prompt tokens and time to its first block, when its backend reports them (the
    in-process engine does; replay and remote backends do not, and then nothing is shown)."""
    calls = stats.get("model_calls") or []
    last = calls[-1] if calls and isinstance(calls[-1], dict) else {}
    if "reused_tokens" not in last:
        return {}
    out = {"cached": int(last["reused_tokens"] or 0)}
    if float(last.get("first_block_seconds") or 0) > 0:  # 0: not measured
        out["first_block"] = float(last["first_block_seconds"])
    return out
