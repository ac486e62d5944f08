"""Size limits on tool arguments (docs/tools.md, "Argument limits"): a call a model writes can hold
anything, and an argument no tool could use is refused at once with a one-line reason, before it
reaches the filesystem (ENAMETOOLONG), a regex engine or a difflib suggestion over a megabyte path.

Every check returns the message for the model, or None when the value is fine."""
from __future__ import annotations

import re

MAX_PATH_BYTES = 4096       # PATH_MAX on Linux
MAX_NAME_BYTES = 255        # NAME_MAX: one path component
MAX_PATTERN_BYTES = 8192    # a grep regular expression
MAX_GLOB_BYTES = 1024       # a list_files pattern or a grep glob
MAX_COMMAND_BYTES = 65536   # a shell command (one exec argument is at most 128 KiB on Linux)
MAX_CONTENT_BYTES = 16 * 1024 * 1024  # write_file content, edit_file old/new, apply_patch patch
MAX_STRING_BYTES = 1024 * 1024        # any other string argument
MAX_ARRAY_ITEMS = 1000

_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def scrub(text: str) -> str:
    """Lone surrogates replaced by U+FFFD (they cannot be encoded for a path, a log or a pipe)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def _size_error(what: str, text: str, limit: int) -> str | None:
    # a character is at least one byte: a long string is refused without encoding it
    size = len(text) if len(text) > limit else utf8_size(text)
    if size <= limit:
        return None
    return f"{what} is {size:,} bytes long; the limit is {limit:,} bytes"


def path_error(path: str | None, what: str = "path") -> str | None:
    """A path of at most MAX_PATH_BYTES, each component at most MAX_NAME_BYTES, no NUL byte."""
    if path is None:
        return None
    if not isinstance(path, str):
        return f"{what} must be a string"
    err = _size_error(what, path, MAX_PATH_BYTES)
    if err:
        return err
    if "\x00" in path:
        return f"{what} contains a NUL byte"
    for part in path.replace("\\", "/").split("/"):
        if len(part) > MAX_NAME_BYTES // 4 and utf8_size(part) > MAX_NAME_BYTES:
            shown = part[:40] + "..."
            return (f"{what} has a component of {utf8_size(part):,} bytes ({shown!r}); a file "
                    f"name is at most {MAX_NAME_BYTES} bytes")
    return None


def pattern_error(pattern: str | None, what: str = "pattern") -> str | None:
    if pattern is None:
        return None
    return _size_error(what, pattern, MAX_PATTERN_BYTES)


def glob_error(glob: str | None, what: str = "glob") -> str | None:
    if glob is None:
        return None
    return _size_error(what, glob, MAX_GLOB_BYTES)


# tool argument -> (checker) for the registry; arguments not named get MAX_STRING_BYTES
_PATH_ARGS = {"path"}
_BIG = {"content", "old", "new", "patch"}


def argument_error(tool: str, arg: str, value: object) -> str | None:
    """The limit a string (or array of strings) argument breaks, as a one-line message."""
    what = f"{tool}: argument {arg!r}"
    if isinstance(value, list):
        if len(value) > MAX_ARRAY_ITEMS:
            return f"{what} has {len(value):,} items; the limit is {MAX_ARRAY_ITEMS:,}"
        if tool == "repo_map" and arg == "paths":
            return next((e for e in (path_error(v, what) for v in value) if e), None)
        return next((e for e in (argument_error(tool, arg, v) for v in value) if e), None)
    if not isinstance(value, str):
        return None
    if arg in _PATH_ARGS:
        return path_error(value, what)
    if tool == "grep" and arg == "pattern":
        return pattern_error(value, what)
    if arg == "glob" or (tool == "list_files" and arg == "pattern"):
        return glob_error(value, what)
    if tool == "run_shell" and arg == "command":
        return _size_error(what, value, MAX_COMMAND_BYTES)
    if arg in _BIG:
        return _size_error(what, value, MAX_CONTENT_BYTES)
    return _size_error(what, value, MAX_STRING_BYTES)
