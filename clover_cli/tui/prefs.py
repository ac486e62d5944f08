"""The TUI's own remembered settings (the theme), in `$XDG_CONFIG_HOME/clover/tui.json`.

Kept apart from config.toml (model, approval, threshold: docs/tui.md, "Configuration"): this file
is written by the TUI itself. A missing, unreadable or malformed file means defaults; writing
never raises.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT_THEME = "textual-dark"
THEME_ALIASES = {"dark": "textual-dark", "light": "textual-light"}


def prefs_path() -> Path:
    from clover_cli.agent.interface import config_file
    return config_file("tui.json")


def load_prefs() -> dict:
    try:
        data = json.loads(prefs_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_pref(key: str, value: object) -> str | None:
    """Remember `key` = `value`; returns an error message instead of raising."""
    path = prefs_path()
    data = load_prefs()
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        return f"could not save {path}: {exc.strerror or exc}"
    return None
