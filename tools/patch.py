"""apply_patch: unified diffs (parsed by `unidiff`), multi-file, with new, deleted and renamed
files. Hunks are located by their content, tolerantly; the whole patch applies or nothing does.

When a hunk's context occurs more than once, the match nearest the line its `@@` header states
wins, shifted by the offset at which the previous hunk applied, as `git apply` and GNU patch do.
Modes from patch headers are never applied as written: a new file gets 0644 or 0755, an existing
file keeps its mode and only gains or loses the executable bits; new symlinks (mode 120000) are
refused, and a renamed symlink is re-aimed so it still points at the same place inside the root
(docs/tools.md, "apply_patch")."""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .base import ToolResult
from .matching import BlockFinder, Claims, Match, describe_ambiguity, describe_failure
from .paths import PathError, relpath, resolve_in_root, resolve_link_in_root
from .patchtext import fix_hunk_counts, unwrap
from .textio import decode, dominant_eol, encode, is_binary, split_lines
from .writes import FileWrite, Plan, execute, locked

MODE_LINE = re.compile(r"^(?:new file|new) mode (\d+)", re.M)
S_IFLNK, S_IFGITLINK = 0o120000, 0o160000


class PatchError(ValueError):
    """A patch that cannot be applied; the message is for the model."""


@dataclass
class _Line:
    kind: str      # " ", "-", "+"
    text: str      # without terminator
    eol: str       # "\n", "\r\n" or "" (no newline at end of file)


def _hunk_lines(hunk) -> list[_Line]:
    raw = list(hunk)
    out: list[_Line] = []
    for i, line in enumerate(raw):
        if line.line_type not in (" ", "-", "+"):
            continue
        value = line.value
        eol = "\r\n" if value.endswith("\r\n") else ("\n" if value.endswith("\n") else "")
        if i + 1 < len(raw) and raw[i + 1].line_type == "\\":
            eol = ""
        out.append(_Line(line.line_type, value[: len(value) - len(eol)] if eol else value.rstrip("\n"),
                         eol))
    return out


def _header(hunk) -> str:
    return f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"


def _anchored(found: list[Match], entries: list[_Line], n_old: int, n_lines: int) -> list[Match]:
    """Break a tie the way GNU patch reads context: a hunk with less context before its first
    change than after its last sits at the start of the file, and the reverse at the end."""
    kinds = [e.kind for e in entries]
    changed = [i for i, k in enumerate(kinds) if k != " "]
    if not changed:
        return found
    lead, trail = changed[0], len(kinds) - 1 - changed[-1]
    if lead < trail:
        return [m for m in found if m.start == 0] or found
    if trail < lead:
        return [m for m in found if m.start + n_old == n_lines] or found
    return found


def _nearest(found: list[Match], expected: int) -> Match:
    """The match nearest the expected start; on a tie the later one (GNU patch looks forward
    first)."""
    return min(found, key=lambda m: (abs(m.start - expected), m.start < expected))


def apply_hunks(rel: str, data: bytes | None, hunks: list,
                numbered: list[bool] | None = None) -> tuple[bytes, list[str]]:
    """Apply `hunks` to `data` (None for a new file); returns new bytes and notes.

    `numbered[k]` False marks a hunk whose `@@` header had no line numbers (its context must
    then be unique). Raises PatchError naming the failed hunk, with the closest lines of the file.
    """
    if data is not None and is_binary(data):
        raise PatchError(f"{rel} is a binary file; patches to binary files are not supported.")
    text, enc = decode(data) if data is not None else ("", "utf-8")
    lines = split_lines(text)
    eol = dominant_eol(text, default="")
    finder, claims = BlockFinder(lines), Claims(len(lines))
    plans, notes = [], []
    offset = 0  # where the previous hunk applied, relative to its header's line
    for k, hunk in enumerate(hunks, 1):
        has_numbers = numbered[k - 1] if numbered and k - 1 < len(numbered) else True
        stated = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        what = f"Hunk {k} of {len(hunks)} for {rel} ({_header(hunk)})"
        entries = _hunk_lines(hunk)
        old = [e.text for e in entries if e.kind != "+"]
        match: Match | None = None
        if not old:
            start = max(0, min(stated + offset, len(lines)))
        else:
            found = finder.find(old, claims)
            if not found:
                raise PatchError(describe_failure(what, rel, lines, old))
            if len(found) > 1:
                found = _anchored(found, entries, len(old), len(lines))
            if len(found) > 1 and not has_numbers:
                raise PatchError(describe_ambiguity(what, rel, found))
            match = _nearest(found, stated + offset)
            start = match.start
            if len(found) > 1:
                notes.append(f"hunk {k} of {rel}: its context occurs {len(found)} times; applied "
                             f"at line {start + 1}, nearest the line its header names")
            if match.level != "exact":
                notes.append(f"hunk {k} of {rel} matched at line {start + 1} ignoring {match.level}")
            if has_numbers:
                offset = start - stated
        claims.add(range(start, start + len(old)))
        plans.append((start, len(old), entries, match))
    # one pass over the file in order (splicing hunk by hunk costs the file's length per hunk);
    # at one position a pure insertion goes before the hunk that replaces lines there
    plans.sort(key=lambda p: (p[0], p[1] > 0))
    out: list[str] = []
    cursor = 0
    for start, length, entries, match in plans:
        start = max(start, cursor)
        out.extend(lines[cursor:start])
        fi = start
        for e in entries:
            if e.kind == " ":
                out.append(lines[fi])
                fi += 1
            elif e.kind == "-":
                fi += 1
            else:
                line = match.reindent(e.text) if match else e.text
                out.append(line + ((eol or e.eol) if e.eol else ""))
        cursor = start + length
    out.extend(lines[cursor:])
    lines = out
    fill = eol or "\n"
    for i in range(len(lines) - 1):
        if not lines[i].endswith("\n"):
            lines[i] += fill
    try:
        return encode("".join(lines), enc), notes
    except UnicodeEncodeError as exc:
        raise PatchError(f"the new text of {rel} cannot be written in its encoding {enc}: {exc}")


def _names(pf) -> tuple[str | None, str | None]:
    """(source, target) paths without git's a/ b/ prefixes; None for /dev/null."""
    src, dst = (n[1:-1] if n and len(n) > 1 and n[0] == n[-1] == '"' else n
                for n in (pf.source_file, pf.target_file))
    src = None if src in ("/dev/null", None) else src
    dst = None if dst in ("/dev/null", None) else dst
    gitstyle = (src is None or src.startswith("a/")) and (dst is None or dst.startswith("b/"))
    if gitstyle:
        src = src[2:] if src else None
        dst = dst[2:] if dst else None
    return src, dst


def _pick_existing(root: Path, names: list[str | None]) -> str | None:
    """For a plain `diff -u` modification: the first candidate name (or it minus its first
    directory, like `patch -p1`) that exists in the repository."""
    tries = []
    for n in names:
        if n:
            tries.append(n)
            if "/" in n:
                tries.append(n.split("/", 1)[1])
    for n in tries:
        try:
            if resolve_in_root(root, n).is_file():
                return n
        except PathError:
            continue
    return next((n for n in names if n), None)


def plan_patch(root: Path, patch: str) -> Plan:
    """Compute every file's new content; raises PatchError (nothing is written here)."""
    root = Path(root).resolve()
    patchset, numbered = _parse(patch)
    planner = _Planner(root)
    flags = iter(numbered)
    for pf in patchset:
        hunks = list(pf)
        planner.file(pf, hunks, [next(flags, True) for _ in hunks])
    return planner.plan()


def _parse(patch: str):
    """The patch as a unidiff PatchSet, and per hunk whether its @@ header carried line counts
    (fix_hunk_counts); a one-line PatchError for what cannot be parsed or holds no file."""
    import unidiff  # imported lazily: only patches need it

    numbered: list[bool] = []
    try:
        patchset = unidiff.PatchSet(fix_hunk_counts(unwrap(patch), numbered))
    except unidiff.UnidiffParseError as exc:
        hint = (" The last hunk has fewer lines than its @@ header says: is the patch cut off?"
                if "shorter" in str(exc) else "")
        raise PatchError(f"could not parse the patch: {exc}.{hint} Nothing was changed.") from None
    if not len(patchset):
        raise PatchError("the patch contains no file changes (expected `--- a/PATH`, `+++ b/PATH` "
                         "and `@@` hunks). Nothing was changed.")
    if sum(len(pf) for pf in patchset) != len(numbered):
        numbered = []  # cannot pair flags with hunks: treat every header as numbered
    return patchset, numbered


class _Planner:
    """The files a patch touches, as they would be after it: read once, changed in memory."""

    def __init__(self, root: Path):
        self.root = root
        self.state: dict[str, bytes | None] = {}  # repo-relative path -> new content (None: gone)
        self.original: dict[str, bytes | None] = {}
        self.modes: dict[str, int | None] = {}
        self.links: dict[str, str] = {}  # path -> link text, for symlinks created by renames
        self.summary: list[str] = []
        self.notes: list[str] = []

    def current(self, rel: str) -> bytes | None:
        if rel not in self.state:
            full = self.root / rel
            self.state[rel] = full.read_bytes() if full.is_file() else None
            self.original[rel] = self.state[rel]
            self.modes[rel] = stat.S_IMODE(full.stat().st_mode) if full.is_file() else None
        return self.state[rel]

    def safe(self, name: str, link_itself: bool = False) -> str:
        """Repo-relative path; with link_itself a symlink names the link, not its target."""
        resolve = resolve_link_in_root if link_itself else resolve_in_root
        try:
            return relpath(self.root, resolve(self.root, name, for_write=True))
        except PathError as exc:
            raise PatchError(f"{exc}. Nothing was changed.") from None

    def file(self, pf, hunks: list, flags: list[bool]) -> None:
        """One file's part of the patch."""
        src, dst = _names(pf)
        info = "".join(str(x) for x in pf.patch_info) if pf.patch_info else ""
        mode = MODE_LINE.search(info)
        raw_mode = int(mode.group(1), 8) if mode else None
        if raw_mode is not None and raw_mode & 0o170000 in (S_IFLNK, S_IFGITLINK):
            what = "a symlink" if raw_mode & 0o170000 == S_IFLNK else "a submodule"
            raise PatchError(f"{dst or src} would become {what} (mode {mode.group(1)}); patches "
                             "may only create and change regular files. Nothing was changed.")
        if pf.is_binary_file:
            raise PatchError(f"binary patch for {dst or src} is not supported. Nothing was changed.")
        # added or deleted only by a /dev/null name (git's new/deleted file headers give one);
        # unidiff also guesses from a lone `@@ -0,0` / `+0,0` hunk, but that is how a patch fills
        # an empty file or empties one that stays
        if src is None and dst:
            self._create(dst, hunks, flags, raw_mode)
        elif dst is None and src:
            self._delete(src, pf, hunks)
        else:
            self._change(src, dst, pf, hunks, flags, raw_mode, renamed="rename from " in info)

    def _create(self, dst: str, hunks: list, flags: list[bool], raw_mode: int | None) -> None:
        rel = self.safe(dst)
        if self.current(rel) is not None:
            raise PatchError(f"{rel} already exists; the patch creates it as a new file. "
                             "Use a modification hunk instead. Nothing was changed.")
        new, notes = apply_hunks(rel, None, hunks, flags)
        self.state[rel] = new
        self.modes[rel] = 0o755 if raw_mode is not None and raw_mode & 0o111 else 0o644
        self.summary.append(f"created {rel}")
        self.notes.extend(notes)

    def _delete(self, src: str, pf, hunks: list) -> None:
        rel = self.safe(_pick_existing(self.root, [src]), link_itself=True)
        data = self.current(rel)
        if data is None:
            raise PatchError(f"{rel} does not exist, so it cannot be deleted. Nothing was changed.")
        if len(pf) and not is_binary(data):
            _check_deleted_content(self.root / rel, rel, data, hunks)
        self.state[rel] = None
        self.summary.append(f"deleted {rel}")

    def _change(self, src, dst, pf, hunks: list, flags: list[bool], raw_mode: int | None,
                renamed: bool) -> None:
        """A modification, a rename, or both."""
        if renamed:
            src_rel, dst_rel = self.safe(src, link_itself=True), self.safe(dst)
            if (self.root / src_rel).is_symlink():  # rename the link itself, keeping its text
                if len(pf):
                    raise PatchError(f"{src_rel} is a symlink; renaming it with content "
                                     "changes is not supported. Nothing was changed.")
                self.links[dst_rel] = _reanchor(self.root, src_rel, dst_rel,
                                                os.readlink(self.root / src_rel))
        else:
            src_rel = dst_rel = self.safe(_pick_existing(self.root, [dst, src]))
        data = self.current(src_rel)
        if data is None:
            raise PatchError(f"{src_rel} does not exist. Use a new-file diff (--- /dev/null) "
                             "to create it. Nothing was changed.")
        new, notes = apply_hunks(src_rel, data, hunks, flags) if len(pf) else (data, [])
        if dst_rel != src_rel:
            if self.current(dst_rel) is not None:
                raise PatchError(f"cannot rename {src_rel} to {dst_rel}: {dst_rel} exists. "
                                 "Nothing was changed.")
            self.state[src_rel] = None
            self.modes[dst_rel] = _exec_bits(self.modes[src_rel], raw_mode)
            self.summary.append(f"renamed {src_rel} -> {dst_rel}")
        else:
            if raw_mode is not None:
                self.modes[dst_rel] = _exec_bits(self.modes[dst_rel], raw_mode)
            self.summary.append(f"modified {dst_rel} ({len(pf)} hunk{'s' if len(pf) != 1 else ''})")
        self.state[dst_rel] = new
        self.notes.extend(notes)

    def plan(self) -> Plan:
        """The writes that change something (content, or the executable bits), and the notes."""
        plan = Plan()
        for rel, data in self.state.items():
            mode = self.modes.get(rel)
            mode_changes = (data is not None and mode is not None and (self.root / rel).is_file()
                            and stat.S_IMODE((self.root / rel).stat().st_mode) != mode)
            if data != self.original[rel] or mode_changes:
                plan.writes.append(FileWrite(rel, data, self.original[rel], mode,
                                             link=self.links.get(rel) if data is not None else None))
        plan.notes = ["; ".join(self.summary)] + self.notes
        return plan


def _exec_bits(current: int | None, raw_mode: int | None) -> int | None:
    """An existing file's mode after a patch header's mode: the file keeps its own bits and only
    gains (where it is readable) or loses the executable bits, as git does; setuid, setgid,
    sticky and write bits from a patch are never applied."""
    if current is None or raw_mode is None:
        return current
    if raw_mode & 0o111:
        return current | ((current & 0o444) >> 2)
    return current & ~0o111


def _reanchor(root: Path, src_rel: str, dst_rel: str, text: str) -> str:
    """The link text that makes a symlink moved from `src_rel` to `dst_rel` point at the same
    place (a relative target is relative to the link's folder, so moving it changes where it
    points); PatchError when that place is not inside the root."""
    base = str(root)
    target = os.path.normpath(text if os.path.isabs(text)
                              else os.path.join(base, os.path.dirname(src_rel), text))
    if target != base and not target.startswith(base + os.sep):
        raise PatchError(f"{src_rel} is a symlink that leads outside the repository; it cannot "
                         "be renamed. Nothing was changed.")
    if os.path.isabs(text):
        return text
    return os.path.relpath(target, os.path.join(base, os.path.dirname(dst_rel)))


def _check_deleted_content(full: Path, rel: str, data: bytes, hunks: list) -> None:
    """A deletion's hunks must remove the whole file; for a symlink they may instead remove
    the link text, as `git diff` writes a deleted link."""
    candidates = [data]
    if full.is_symlink():
        candidates.append(os.readlink(full).encode())
    for content in candidates:
        try:
            rest, _ = apply_hunks(rel, content, hunks)
        except PatchError:
            continue
        if not decode(rest)[0].strip():
            return
    raise PatchError(f"the deletion of {rel} does not match its content. Nothing was changed.")


def apply_patch(root: Path, patch: str) -> ToolResult:
    """Apply a unified diff to the repository; all files change or none does."""
    if not isinstance(patch, str) or not patch.strip():
        return ToolResult(False, "empty patch", {"error": "bad_arguments"})
    return locked(Path(root).resolve(), lambda: _apply(root, patch))


def _apply(root: Path, patch: str) -> ToolResult:
    try:
        plan = plan_patch(root, patch)
    except PatchError as exc:
        return ToolResult(False, str(exc), {"error": "patch_failed"})
    if not plan.writes:
        return ToolResult(True, "The patch changes nothing (files already match).",
                          {"files": []})
    failed = execute(root, plan, "apply_patch " + ", ".join(plan.paths))
    if failed is not None:
        return failed
    text = "Patch applied: " + plan.notes[0] + "."
    if len(plan.notes) > 1:
        text += "\nNotes: " + "; ".join(plan.notes[1:]) + "."
    return ToolResult(True, text, {"files": plan.paths})
