"""What every tool returns (docs/design.md, Boundaries): data, never an exception for ordinary failures."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: str  # the text the model reads
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "output": self.output, **self.details}
