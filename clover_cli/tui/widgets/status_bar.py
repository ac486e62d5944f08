"""The status line: model, block size, threshold, speed, context use, approval mode, branch."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import PurePath

from textual.widgets import Static


def short_model_name(name: str) -> str:
    """Shorten path-like specs (`replay:/tmp/x/s.json` -> `replay:s.json`, `/a/b/ckpt` -> `ckpt`)."""
    prefix, sep, rest = name.partition(":")
    if sep and prefix in ("replay",):
        return f"{prefix}:{PurePath(rest).name}"
    if "/" in name and not sep:
        return PurePath(name).name or name
    return name


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
    approval: str = "ask"
    branch: str | None = None
    busy: str = ""  # "generating", "compacting", ...
    extra: dict = field(default_factory=dict)

    def text(self) -> str:
        """The rendered line (plain text, separated by '·')."""
        parts = [short_model_name(self.model) + (" (loading…)" if self.loading else "")]
        if self.block_size is not None:
            parts.append(f"block {self.block_size}" if self.block_size > 1 else "AR")
        if self.threshold is not None and (self.block_size or 0) > 1:
            parts.append(f"thr {self.threshold:g}")
        if self.tpf is not None:
            parts.append(f"TPF {self.tpf:.2f}")
        if self.tokens_per_second is not None:
            parts.append(f"{self.tokens_per_second:.1f} tok/s")
        if self.context_window:
            used = _k(self.context_used or 0)
            parts.append(f"ctx {used}/{_k(self.context_window)}")
        parts.append(self.approval)
        if self.branch:
            parts.append(f"⎇ {self.branch}")
        if self.busy:
            parts.append(self.busy)
        return " · ".join(parts)


class StatusBar(Static):
    """One line at the bottom; `set(**changes)` updates fields and redraws."""

    def __init__(self) -> None:
        super().__init__("", classes="status-bar", markup=False)
        self.info = StatusInfo()

    def set(self, **changes) -> None:
        """Update some fields of the status and redraw."""
        self.info = replace(self.info, **changes)
        self.update(self.info.text())
