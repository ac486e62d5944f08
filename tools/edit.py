"""edit_file (search and replace, tolerant like apply_patch) and write_file (create/overwrite)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .base import ToolResult
from .matching import describe_ambiguity, describe_failure, find_block
from .paths import PathError, relpath, resolve_in_root
from .textio import (NotRegularFileError, decode, dominant_eol, encode, is_binary, read_regular,
                     split_lines)
from .writes import FileWrite, Plan, execute, locked


class EditError(ValueError):
    """An edit that cannot be made; the message is for the model."""


def _target(root: Path, path: str) -> tuple[Path, str]:
    try:
        full = resolve_in_root(root, path, for_write=True)
    except PathError as exc:
        raise EditError(str(exc)) from None
    rel = relpath(root, full)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        return full, rel
    except NotADirectoryError:
        raise EditError(f"{_file_on_the_way(root, rel)} is a file, so {rel} cannot be a path "
                        "inside it.") from None
    except OSError as exc:
        raise EditError(f"{rel}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise EditError(f"{path} is a directory.")
    if not stat.S_ISREG(st.st_mode):
        raise EditError(f"{rel} is not a regular file (it is {_kind(st.st_mode)}); Clover edits "
                        "regular files only.")
    return full, rel


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _file_on_the_way(root: Path, rel: str) -> str:
    parts = rel.split("/")
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        if os.path.isfile(os.path.join(root, prefix)):
            return prefix
    return rel


def _read(full: Path, rel: str) -> bytes:
    try:
        return read_regular(full)  # non-blocking: a file swapped for a FIFO cannot hang us
    except NotRegularFileError:
        raise EditError(f"{rel} is not a regular file; Clover edits regular files only.") from None
    except OSError as exc:
        raise EditError(f"{rel} cannot be read: {exc.strerror or exc}") from None


def _to_eol(text: str, eol: str) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", eol) if eol != "\n" else text


def plan_edit(root: Path, path: str, old: str, new: str, replace_all: bool = False) -> Plan:
    """Compute the edited file; raises EditError with a message for the model."""
    full, rel = _target(root, path)
    if not full.is_file():
        raise EditError(f"{rel} does not exist. Use write_file to create it.")
    data = _read(full, rel)
    if is_binary(data):
        raise EditError(f"{rel} is a binary file; it cannot be edited as text.")
    if old == "":
        raise EditError("`old` is empty; give the exact text to replace (or use write_file).")
    text, enc = decode(data)
    eol = dominant_eol(text)
    note = ""
    old_n = _to_eol(old, eol)
    count = text.count(old_n)
    if count == 0 and old_n != old:
        old_n, count = old, text.count(old)
    if count:
        if count > 1 and not replace_all:
            starts, pos = [], text.find(old_n)
            while pos != -1 and len(starts) < 10:
                starts.append(text.count("\n", 0, pos) + 1)
                pos = text.find(old_n, pos + 1)
            raise EditError(f"`old` occurs {count} times in {rel} (lines "
                            f"{', '.join(map(str, starts))}). Include more surrounding text so "
                            "it is unique, or set replace_all.")
        result = text.replace(old_n, _to_eol(new, eol)) if replace_all else \
            text.replace(old_n, _to_eol(new, eol), 1)
    else:
        result, count, note = _tolerant(text, rel, old, new, eol, replace_all)
    try:
        new_bytes = encode(result, enc)
    except UnicodeEncodeError as exc:
        raise EditError(f"the new text cannot be written in {rel}'s encoding {enc}: {exc}") from None
    plan = Plan([FileWrite(rel, new_bytes, data, stat.S_IMODE(full.stat().st_mode))])
    plan.notes.append(f"replaced {count} occurrence{'s' if count != 1 else ''} in {rel}{note}")
    return plan


def _tolerant(text: str, rel: str, old: str, new: str, eol: str, replace_all: bool):
    """Line-based match ignoring trailing whitespace / a consistent indentation shift."""
    lines = split_lines(text)
    block = old.replace("\r\n", "\n").strip("\n").split("\n")
    found = find_block(lines, block)
    if not found:
        raise EditError(describe_failure("edit_file", rel, lines, block))
    if len(found) > 1 and not replace_all:
        raise EditError(describe_ambiguity("`old`", rel, found))
    new_lines = new.replace("\r\n", "\n").strip("\n").split("\n") if new.strip("\n") else []
    for mt in sorted(found, key=lambda m: m.start, reverse=True):
        last = lines[mt.start + len(block) - 1]
        tail_eol = last[len(last.rstrip("\r\n")):]
        repl = [mt.reindent(x) + eol for x in new_lines]
        if repl:
            repl[-1] = repl[-1][: -len(eol)] + tail_eol
        lines[mt.start:mt.start + len(block)] = repl
    return "".join(lines), len(found), f" (matched ignoring {found[0].level})"


def plan_write(root: Path, path: str, content: str) -> Plan:
    """Compute a create/overwrite; an existing CRLF file keeps CRLF line endings."""
    full, rel = _target(root, path)
    old = _read(full, rel) if full.is_file() else None
    enc, mode = "utf-8", None
    if old is not None and not is_binary(old):
        text, enc = decode(old)
        if dominant_eol(text) == "\r\n":
            content = _to_eol(content, "\r\n")
        mode = stat.S_IMODE(full.stat().st_mode)
    try:
        data = encode(content, enc)
    except UnicodeEncodeError:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates: no encoding can write them
            raise EditError(f"the content cannot be written: {exc.reason} at position "
                            f"{exc.start} (a lone surrogate); nothing was written.") from None
    plan = Plan([FileWrite(rel, data, old, mode)])
    lines = content.count("\n") + (not content.endswith("\n") and bool(content))
    plan.notes.append(f"{'overwrote' if old is not None else 'created'} {rel} "
                      f"({_count(len(data), 'byte')}, {_count(lines, 'line')})")
    return plan


def _run(root: Path, planner, label: str, *args) -> ToolResult:
    return locked(Path(root).resolve(), lambda: _plan_and_write(root, planner, label, *args))


def _plan_and_write(root: Path, planner, label: str, *args) -> ToolResult:
    try:
        plan = planner(root, *args)
    except EditError as exc:
        return ToolResult(False, str(exc), {"error": "edit_failed"})
    if all(w.new == w.old for w in plan.writes):
        return ToolResult(True, f"No change: {plan.paths[0]} already has this content.",
                          {"files": []})
    failed = execute(root, plan, f"{label} {plan.paths[0]}")
    if failed is not None:
        return failed
    return ToolResult(True, plan.notes[0][0].upper() + plan.notes[0][1:] + ".", {"files": plan.paths})


def edit_file(root: Path, path: str, old: str, new: str, replace_all: bool = False) -> ToolResult:
    """Replace `old` with `new` in a file (`old` must be unique unless `replace_all`)."""
    return _run(root, plan_edit, "edit_file", path, old, new, replace_all)


def write_file(root: Path, path: str, content: str) -> ToolResult:
    """Create or overwrite a file with `content`."""
    return _run(root, plan_write, "write_file", path, content)


def _count(n: int, word: str) -> str:
    """"1 line", "2 lines", "0 bytes"."""
    return f"{n} {word}{'' if n == 1 else 's'}"
