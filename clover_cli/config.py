"""User and project defaults for `clover` (model, approval mode, confidence threshold).

Two TOML files are read, later ones winning:

1. the user file, `$XDG_CONFIG_HOME/clover/config.toml` (default `~/.config/clover/config.toml`);
2. the project file, `<root>/.clover/config.toml`.

Command-line options win over both. Example file::

    model = "tiny"
    approval = "ask"          # ask | auto-edit | yolo | read-only
    threshold = 0.95          # block-diffusion commit threshold, 0 < t <= 1
    test_cmd = "tox -e py311 -- {test}"   # `clover fix`'s test command (docs/modes.md)

`clover` (the TUI) uses the first three; `clover run` the model, threshold and approval (`ask` is
the TUI's: headless runs then use auto-edit); `clover fix` the model and test command.

Only the standard library is imported here, so the CLI stays fast.
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

APPROVAL_MODES = ("ask", "auto-edit", "yolo", "read-only")
DEFAULT_MODEL = "tiny"


class ConfigError(ValueError):
    """A config file could not be read or holds a bad value; str() is one line for the user."""


@dataclass(frozen=True)
class CloverConfig:
    """Resolved defaults for a session."""

    model: str = DEFAULT_MODEL
    approval: str = "ask"
    threshold: float = 0.95
    test_cmd: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model must be a non-empty string")
        if self.approval not in APPROVAL_MODES:
            raise ConfigError(f"approval must be one of {', '.join(APPROVAL_MODES)}, got {self.approval!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise ConfigError(f"threshold must be a number, got {self.threshold!r}")
        if not 0.0 < float(self.threshold) <= 1.0:
            raise ConfigError(f"threshold must be in (0, 1], got {self.threshold}")
        object.__setattr__(self, "threshold", float(self.threshold))
        if self.test_cmd is not None and (not isinstance(self.test_cmd, str)
                                          or not self.test_cmd.strip()):
            raise ConfigError("test_cmd must be a non-empty string")


def user_config_path() -> Path:
    """The user's config file path (XDG_CONFIG_HOME respected)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "clover" / "config.toml"


def project_config_path(root: Path) -> Path:
    """The project's config file path under `root`."""
    return Path(root) / ".clover" / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    data.pop("mcp", None)  # [mcp.servers.*]: read by clover_cli/agent/mcp/config.py, user file only
    known = {f.name for f in fields(CloverConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return data


def load_config(root: Path | None = None, **overrides: Any) -> CloverConfig:
    """Merge user file, project file and non-None `overrides` (CLI options) into a CloverConfig.

    Raises ConfigError with the offending file named when a file or value is bad.
    """
    merged: dict[str, Any] = {}
    sources = [user_config_path()]
    if root is not None:
        sources.append(project_config_path(root))
    for path in sources:
        data = _read(path)
        try:
            CloverConfig(**{**merged, **data})
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        merged.update(data)
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return replace(CloverConfig(), **merged)
