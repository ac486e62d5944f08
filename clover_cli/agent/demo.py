"""The bundled `tiny` is a demo model: the one line every front end shows on it, saying how to pick
a real model (`clover models`). The text and the check live with the checkpoint catalog
(engine/catalog.py); the TUI reaches them here (docs/design.md, "Boundaries": tui -> agent -> engine)."""
from __future__ import annotations

from clover_cli.engine.catalog import DEMO_NOTICE, demo_notice

__all__ = ["DEMO_NOTICE", "demo_notice"]
