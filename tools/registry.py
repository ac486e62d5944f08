"""The tool registry: names, JSON schemas (descriptions from prompts/tools/), argument
validation and the single entry point `run_tool` used by `clover tool`. The module functions know
the built-in tools only; an agent's own tool set (`ToolSet`: the built-ins plus its MCP servers'
tools) is what the agent loop uses, so two agents in one process never share external tools."""
from __future__ import annotations

import json
import math
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, NamedTuple

from .argcheck import argument_error, path_error, scrub
from .base import ToolResult
from .paths import PathError

# name -> {argument: (json type, required)}; descriptions live in prompts/tools/<name>.txt
PARAMETERS: dict[str, dict[str, tuple[str, bool]]] = {
    "read_file": {"path": ("string", True), "start_line": ("integer", False),
                  "end_line": ("integer", False)},
    "list_files": {"path": ("string", False), "pattern": ("string", False)},
    "grep": {"pattern": ("string", True), "path": ("string", False), "glob": ("string", False),
             "ignore_case": ("boolean", False)},
    "repo_map": {"paths": ("array", False), "budget_tokens": ("integer", False)},
    "run_shell": {"command": ("string", True), "timeout": ("number", False)},
    "apply_patch": {"patch": ("string", True)},
    "edit_file": {"path": ("string", True), "old": ("string", True), "new": ("string", True),
                  "replace_all": ("boolean", False)},
    "write_file": {"path": ("string", True), "content": ("string", True)},
}
TOOL_NAMES: tuple[str, ...] = tuple(PARAMETERS)
MAX_NUMBER = 10 ** 15       # larger numeric arguments are rejected (no tool needs them)
MAX_NUMBER_CHARS = 40
WRITING_TOOLS = frozenset({"apply_patch", "edit_file", "write_file"})



class ExternalTool(NamedTuple):
    """A tool from outside (a user's MCP server, clover_cli/agent/mcp): its function schema, how
    to run it (`run(args, cancel)`), and whether it counts as writing."""
    schema: dict
    run: Callable[[dict, Any], ToolResult]
    writing: bool


class ToolArgumentError(ValueError):
    """Unknown tool name or arguments that do not fit the tool's schema."""


def _prompt_text(name: str) -> str:
    path = Path(__file__).resolve().parent.parent / "prompts" / "tools" / f"{name}.txt"
    try:
        from importlib import resources
        return resources.files("clover_cli.prompts.tools").joinpath(f"{name}.txt").read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        return path.read_text()


@lru_cache(maxsize=None)
def _descriptions(name: str) -> tuple[str, dict[str, str]]:
    """Parse prompts/tools/<name>.txt: the description, then `## arg` sections."""
    sections = _prompt_text(name).split("\n## ")
    params = {}
    for sec in sections[1:]:
        head, _, text = sec.partition("\n")
        params[head.strip()] = text.strip()
    return sections[0].strip(), params


def tool_schemas() -> list[dict]:
    """The tools in OpenAI function format, for chat templates and remote servers."""
    out = []
    for name, params in PARAMETERS.items():
        desc, pdesc = _descriptions(name)
        props = {}
        for arg, (typ, _) in params.items():
            prop: dict[str, Any] = {"type": typ, "description": pdesc.get(arg, "")}
            if typ == "array":
                prop["items"] = {"type": "string"}
            props[arg] = prop
        out.append({"type": "function", "function": {
            "name": name, "description": desc,
            "parameters": {"type": "object", "properties": props,
                           "required": [a for a, (_, req) in params.items() if req]}}})
    return out


def _coerce(name: str, args: Any) -> dict:
    if name not in PARAMETERS:
        raise ToolArgumentError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolArgumentError(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    params = PARAMETERS[name]
    unknown = sorted(set(args) - set(params))
    if unknown:
        raise ToolArgumentError(f"{name}: unknown argument(s) {', '.join(unknown)}; expected "
                                f"{', '.join(params)}")
    out = {}
    for arg, (typ, required) in params.items():
        if arg not in args or args[arg] is None:
            if required:
                raise ToolArgumentError(f"{name}: missing required argument {arg!r}")
            continue
        out[arg] = _coerce_value(name, arg, typ, args[arg])
        limit = argument_error(name, arg, out[arg])  # sizes: docs/tools.md, "Argument limits"
        if limit:
            raise ToolArgumentError(limit)
    return out


def _coerce_value(name: str, arg: str, typ: str, value: Any) -> Any:
    bad = ToolArgumentError(f"{name}: argument {arg!r} must be a {typ}, got {_short_repr(value)}")
    if typ == "string":
        if isinstance(value, str):
            return scrub(value)
        raise bad
    if typ == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise bad
    if typ in ("integer", "number"):
        return _coerce_number(typ, value, bad)
    if typ == "array":
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [scrub(v) for v in value]
        raise bad
    raise bad


def _short_repr(value: Any) -> str:
    """repr() cut to 200 characters; safe for ints too long to print."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 600:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _coerce_number(typ: str, value: Any, bad: ToolArgumentError) -> int | float:
    """A finite int/float (or numeric string) of sane size; NaN, inf, 1e400 and 400-digit
    integers are bad arguments, never an exception that escapes."""
    if isinstance(value, bool):
        raise bad
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_NUMBER_CHARS:
            raise bad
        try:
            value = int(text) if text.lstrip("+-").isdigit() else float(text)
        except (ValueError, OverflowError):
            raise bad from None
    if isinstance(value, int):
        if abs(value) > MAX_NUMBER:
            raise bad
        return value if typ == "integer" else float(value)
    if not isinstance(value, float) or not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise bad
    if typ == "integer":
        if not value.is_integer():
            raise bad
        return int(value)
    return value


def validate_args(name: str, args: Any) -> None:
    """Raise ToolArgumentError when `name` is unknown or `args` do not fit its schema."""
    _coerce(name, args)


def is_writing_tool(name: str) -> bool:
    """Whether the built-in tool changes files (and therefore checkpoints and needs edit approval)."""
    return name in WRITING_TOOLS


def _dispatch(name: str) -> Callable[..., ToolResult]:
    if name == "read_file":
        from .read_file import read_file as fn
    elif name == "list_files":
        from .list_files import list_files as fn
    elif name == "grep":
        from .grep import grep as fn
    elif name == "repo_map":
        from .repomap import repo_map as fn
    elif name == "run_shell":
        from .shell import run_shell as fn
    elif name == "apply_patch":
        from .patch import apply_patch as fn
    elif name == "edit_file":
        from .edit import edit_file as fn
    else:
        from .edit import write_file as fn
    return fn


def run_tool(name: str, args: dict, root: Path, *, on_output: Callable[[str], None] | None = None,
             timeout: float | None = None,
             cancel: threading.Event | None = None, sandbox_profile: str | None = None) -> ToolResult:
    """Run one tool. Never raises: failures come back as ok=False, and so does any exception a
    tool lets escape (details["error"] == "internal"); the output is always valid UTF-8.

    Bad arguments (wrong type, unknown, over a size limit of argcheck) give
    details["error"] == "bad_arguments". `timeout` is the default for
    run_shell when the call gives none; `on_output` receives run_shell's output as it arrives.
    `cancel`: when set, run_shell kills its process group within ~0.3 s and returns ok=False
    with details["cancelled"] = True; the other tools are short and ignore it.
    `sandbox_profile`: run_shell's sandbox profile instead of the root's (tools/sandbox.py).
    """
    try:
        kwargs = _coerce(name, args)
    except (ToolArgumentError, ValueError, OverflowError, TypeError, RecursionError) as exc:
        return ToolResult(False, scrub(str(exc)[:300]), {"error": "bad_arguments"})
    if name == "run_shell" and sandbox_profile:
        kwargs["sandbox_profile"] = sandbox_profile
    result = _run(name, kwargs, Path(root), on_output, timeout, cancel)
    output = scrub(result.output) if isinstance(result.output, str) else str(result.output)
    return result if output is result.output else ToolResult(result.ok, output, result.details)


def _run(name: str, kwargs: dict, root: Path, on_output, timeout, cancel) -> ToolResult:
    if not root.is_dir():
        return ToolResult(False, f"repository root {root} is not a directory", {"error": "root"})
    if name == "run_shell":
        kwargs.setdefault("timeout", timeout)
        kwargs["max_timeout"] = timeout  # the user's limit caps the model's timeout
        kwargs["on_output"] = on_output
        kwargs["cancel"] = cancel
    try:
        return _dispatch(name)(root, **kwargs)
    except PathError as exc:  # a path refused mid-call (e.g. a directory swapped for a symlink)
        return ToolResult(False, str(exc), {"error": "path"})
    except OSError as exc:  # the file system changed or refused underneath: an ordinary failure
        where = f" ({exc.filename})" if exc.filename else ""
        return ToolResult(False, f"{name} failed: {exc.strerror or exc}{where}", {"error": "os"})
    except Exception as exc:  # a bug or an OS error: report it to the model, do not crash the turn
        text = f"{name} failed unexpectedly: {type(exc).__name__}: {exc}"
        return ToolResult(False, text if len(text) <= 500 else text[:500] + " ...", {"error": "internal"})


def planned_writes(name: str, args: dict, root: Path) -> list[str]:
    """Repository-relative paths a call would write or delete ([] for read-only tools)."""
    if not is_writing_tool(name):
        return []
    try:
        return _plan(name, _coerce(name, args), Path(root)).paths
    except Exception:
        return _named_paths(name, args)


def _named_paths(name: str, args: dict) -> list[str]:
    """The paths a call that failed validation names (those no file could have are left out)."""
    return [p for p in _named_paths_raw(name, args) if path_error(p) is None]


def _named_paths_raw(name: str, args: dict) -> list[str]:
    if not isinstance(args, dict):
        return []
    if name in ("edit_file", "write_file"):
        return [str(args.get("path", ""))] if args.get("path") else []
    paths = []
    for line in str(args.get("patch", "")).splitlines():
        if line.startswith(("--- ", "+++ ")):
            p = line[4:].split("\t")[0].strip()
            if p != "/dev/null":
                paths.append(p[2:] if p[:2] in ("a/", "b/") else p)
    return list(dict.fromkeys(paths))


def _plan(name: str, kwargs: dict, root: Path):
    if name == "apply_patch":
        from .patch import plan_patch
        return plan_patch(root, kwargs["patch"])
    from .edit import plan_edit, plan_write
    if name == "edit_file":
        return plan_edit(root, kwargs["path"], kwargs["old"], kwargs["new"],
                         kwargs.get("replace_all", False))
    return plan_write(root, kwargs["path"], kwargs["content"])


def preview(name: str, args: dict, root: Path) -> str:
    """What an approval prompt shows: the unified diff of an edit, or the shell command."""
    try:
        kwargs = _coerce(name, args)
    except (ToolArgumentError, ValueError, OverflowError, TypeError) as exc:
        return f"(invalid call: {exc})"
    if name == "run_shell":
        t = kwargs.get("timeout")
        return f"$ {kwargs['command']}" + (f"    (timeout {t:g} s)" if t else "")
    if not is_writing_tool(name):
        return f"{name} " + json.dumps(kwargs, ensure_ascii=False)
    from .writes import render_diff
    try:
        plan = _plan(name, kwargs, Path(root))
    except Exception as exc:  # the call would fail: say so instead of a diff
        return f"(this {name} call would fail: {exc})"
    return render_diff(plan) or "(no changes)"

