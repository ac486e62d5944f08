"""The one settings loader: defaults, user file, trusted repository file and flags (docs/security.md).

Every command (`clover`/`clover chat`, `run`, `fix`, and `fix`'s test command in modes/fix/testrun.py)
gets its settings from `load_settings`, which merges, later ones winning:

1. the defaults, the field defaults of `CloverConfig` below (the only place they are written);
2. the user file, `$XDG_CONFIG_HOME/clover/config.toml` (default `~/.config/clover/config.toml`);
3. the repository file, `<root>/.clover/config.toml`, **only if the user trusts the repository**
   (`clover trust`, clover_cli/trust.py), and even then limited: it may lower the approval mode
   but never raise it (read-only < ask < auto-edit < yolo), and it may not pick a remote model
   (`openai:...`, anything with `://`), which would send the prompts and the API key elsewhere,
   unless the user file names the same model. An untrusted repository's file is not even opened;
   a warning names `clover trust`;
4. the environment: CLOVER_DEVICE, CLOVER_DTYPE and CLOVER_QUANTIZE;
5. the command-line flags.

Each value is checked once, by `CloverConfig.__post_init__`, and a bad value names the file or
flag it came from. Example file::

    model = "tiny"
    approval = "ask"          # ask | auto-edit | yolo | read-only
    threshold = 0.95          # block-diffusion commit threshold, 0 < t <= 1
    test_cmd = "tox -e py311 -- {test}"   # `clover fix`'s test command (docs/modes.md)
    cache_mb = 2048           # memory for earlier requests' caches (prefix reuse; 0: off;
                              # default a quarter of free memory; never from a repository)
    device = "auto"           # auto | cpu | cuda | cuda:N | mps; $CLOVER_DEVICE beats the file
    dtype = "auto"            # auto | float32 | bfloat16 | float16; $CLOVER_DTYPE likewise
    quantize = "none"         # none | int8 | int4 weight-only on load; $CLOVER_QUANTIZE likewise
                              # (device and dtype never from a repository; docs/engine.md "Placement")

Only the standard library and two constant modules (the approval modes from
clover_cli/agent/config.py, the threshold and its check from engine/config.py) are imported here,
so the CLI stays fast.
"""
from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from clover_cli.agent.config import APPROVAL_MODES, APPROVAL_ORDER, DEFAULT_APPROVAL
from clover_cli.engine.config import DEFAULT_THRESHOLD, check_threshold
from clover_cli.engine.placement import (DEVICE_ENV, DTYPE_ENV, PlacementError, check_device_text,
                                         check_dtype_text)
from clover_cli.engine.quant_formats import QUANTIZE_ENV, QuantizeChoiceError, check_quantize_text
from clover_cli.trust import TrustStore, config_home

MAX_CONFIG_BYTES = 256 * 1024
KEYS = ("model", "approval", "threshold", "test_cmd", "cache_mb", "device", "dtype", "quantize")
# the machine's resources are the user's to give: a repository's file may not set these
USER_ONLY = ("cache_mb", "device", "dtype", "quantize")
ENV_KEYS = {"device": DEVICE_ENV, "dtype": DTYPE_ENV, "quantize": QUANTIZE_ENV}  # environment beats the files, flags beat it


class ConfigError(ValueError):
    """A config file could not be read or holds a bad value; str() is one line for the user."""


@dataclass(frozen=True)
class CloverConfig:
    """Resolved settings for a session; the field defaults are Clover's defaults."""

    model: str = "tiny"
    approval: str = DEFAULT_APPROVAL
    threshold: float = DEFAULT_THRESHOLD
    test_cmd: str | None = None
    cache_mb: float | None = None  # None: the engine's default (docs/engine.md, "Prefix reuse")
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps (docs/engine.md, "Placement")
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    quantize: str = "none"  # none | int8 | int4 (docs/engine.md, "Quantized weights")

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model must be a non-empty string")
        if self.approval not in APPROVAL_MODES:
            raise ConfigError(f"approval must be one of {', '.join(APPROVAL_MODES)}, got {self.approval!r}")
        try:  # the engine's one check of a threshold: (0, 1]
            object.__setattr__(self, "threshold", check_threshold(self.threshold))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.test_cmd is not None and (not isinstance(self.test_cmd, str)
                                          or not self.test_cmd.strip()):
            raise ConfigError("test_cmd must be a non-empty string")
        if self.cache_mb is not None and (isinstance(self.cache_mb, bool)
                                          or not isinstance(self.cache_mb, (int, float))
                                          or not 0 <= self.cache_mb < float("inf")):
            raise ConfigError(f"cache_mb must be a number of MiB >= 0, got {self.cache_mb!r}")
        try:
            object.__setattr__(self, "device", check_device_text(self.device))
            object.__setattr__(self, "dtype", check_dtype_text(self.dtype))
            object.__setattr__(self, "quantize", check_quantize_text(self.quantize))
        except (PlacementError, QuantizeChoiceError) as exc:
            raise ConfigError(str(exc)) from None


DEFAULT_MODEL = CloverConfig.model


@dataclass(frozen=True)
class Settings:
    """What `load_settings` resolved, and why."""

    config: CloverConfig
    sources: Mapping[str, str] = field(default_factory=dict)  # key -> default|user|repository|flag
    warnings: tuple[str, ...] = ()  # one line each, for stderr
    repo_file: Path | None = None  # <root>/.clover/config.toml when the repository ships one
    repo_trusted: bool | None = None  # the stored decision for the repository (None: never asked)


def user_config_path() -> Path:
    """The user's config file path (XDG_CONFIG_HOME respected)."""
    return config_home() / "config.toml"


def project_config_path(root: Path) -> Path:
    """The repository's own config file path under `root` (read only when trusted)."""
    return Path(root) / ".clover" / "config.toml"


def approval_rank(mode: str) -> int:
    """0 (read-only) .. 3 (yolo)."""
    return APPROVAL_ORDER.index(mode)


def is_remote_model(model: str) -> bool:
    """A model spec that sends the conversation (and an API key) to a server."""
    m = model.strip().lower()
    return m.startswith("openai:") or "://" in m


def _read(path: Path) -> dict[str, Any]:
    """The TOML table in `path` ({} when there is no regular file), bounded before reading."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"{path}: not a regular file")
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KB; not a config file")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({str(exc).splitlines()[0] if str(exc) else exc!r})") from None
    data.pop("mcp", None)  # [mcp.servers.*]: read by clover_cli/agent/mcp/config.py, user file only
    data.pop("shell", None)  # [shell] env = [...]: read by tools/sandbox_env.py, user file only
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")
    return data


def _check(values: dict[str, Any], where: str) -> None:
    try:
        CloverConfig(**values)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except TypeError as exc:  # pragma: no cover - keys are checked before
        raise ConfigError(f"{where}: {exc}") from None


def _inside(path: Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _repo_layer(root: Path, merged: dict[str, Any], user: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The trusted repository file's values, less those a repository may not set."""
    path = project_config_path(root)
    if not _inside(path, root):
        warnings.append(f"ignoring {path}: it leads outside the repository")
        return {}
    data = _read(path)
    _check({**merged, **data}, str(path))
    approval = data.get("approval")
    if approval is not None and approval_rank(approval) > approval_rank(merged["approval"]):
        warnings.append(f"{path}: approval = {approval!r} ignored: a repository may lower the approval "
                        f"mode but never raise it (yours is {merged['approval']!r}; pass --approval "
                        "or set it in your own config file to change it)")
        data.pop("approval")
    for key in USER_ONLY:  # the machine's memory and devices are the user's to give
        if key in data:
            warnings.append(f"{path}: {key} ignored: a repository may not choose Clover's memory use, "
                            f"device or precision; pass --{key.replace('_', '-')} or set it in your own "
                            "config file")
            data.pop(key)
    model = data.get("model")
    if model is not None and is_remote_model(model) and model.strip() != str(user.get("model", "")).strip():
        warnings.append(f"{path}: model = {model!r} ignored: a repository may not send your prompts and "
                        "API key to a server; pass --model or set it in your own config file")
        data.pop("model")
    return data


def load_settings(root: Path | str | None = None, flags: Mapping[str, Any] | None = None, *,
                  needed: Iterable[str] = KEYS, trusted: bool | None = None,
                  store: TrustStore | None = None) -> Settings:
    """Merge defaults, the user file, the trusted repository file and the non-None `flags`.

    `needed`: the keys the command uses; when flags give them all, no file is read (a broken file
    does not stop a fully specified command). `trusted`: the repository's trust decision when the
    caller already has it (else it is looked up in the trust list). Raises ConfigError (one line,
    naming the file or flag) for a bad file or value.
    """
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    unknown = sorted(set(flags) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
    merged: dict[str, Any] = asdict(CloverConfig())
    sources = {k: "default" for k in KEYS}
    warnings: list[str] = []
    repo_file: Path | None = None
    decision: bool | None = None
    if not set(needed) <= set(flags):
        path = user_config_path()
        user = _read(path)
        _check({**merged, **user}, str(path))
        merged.update(user)
        sources.update({k: "user" for k in user})
        if root is not None:
            root = Path(root)
            candidate = project_config_path(root)
            if os.path.lexists(candidate):
                repo_file = candidate
                store = store or TrustStore()
                decision = trusted if trusted is not None else store.decision(root)
                if store.warning:
                    warnings.append(store.warning)
                if decision is None:
                    warnings.append(f"ignoring {candidate}: this repository is not trusted "
                                    f"(run `clover trust {os.path.realpath(root)}` to use its settings)")
                elif decision:
                    repo = _repo_layer(root, merged, user, warnings)
                    merged.update(repo)
                    sources.update({k: "repository" for k in repo})
    for key, variable in ENV_KEYS.items():
        value = os.environ.get(variable, "").strip()
        if value and key not in flags:
            _check({**merged, key: value}, f"${variable}")
            merged[key] = value
            sources[key] = "env"
    for key, value in flags.items():
        _check({**merged, key: value}, f"--{key.replace('_', '-')}")
        merged[key] = value
        sources[key] = "flag"
    return Settings(CloverConfig(**merged), sources, tuple(warnings), repo_file, decision)


def load_config(root: Path | str | None = None, **overrides: Any) -> CloverConfig:
    """`load_settings(root, overrides).config` (warnings dropped): for callers that print none."""
    return load_settings(root, overrides).config
