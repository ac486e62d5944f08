"""The Textual TUI (`clover` / `clover chat`). Only this package imports textual and rich."""
