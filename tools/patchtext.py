"""Clean up a patch's text before `unidiff` parses it: unwrap a Markdown fence, and make each
`@@` header's line counts agree with the hunk body the model actually wrote.

unidiff trusts the counts: a header that undercounts makes it stop early and silently drop the
hunk's last lines (a partial edit). So a hunk body that is longer than its header says, or that
is followed by more of the patch, gets its counts rewritten from the body. A body that is shorter
at the very end of the text is left alone: that looks like a truncated patch, and unidiff's
"shorter than expected" error rejects it.
"""
from __future__ import annotations

import re

FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$", re.S)
BARE_HUNK = re.compile(r"^@@(?:[ \t].*)?$", re.S)  # "@@" or "@@ ... @@" without line numbers


def unwrap(patch: str) -> str:
    """The diff inside a ```diff fence, if the text has one, with LF line ends; ends with a
    newline. A patch with CRLF line ends (written on Windows, or copied from a CRLF file) would
    leave a CR in every file name (`a.py\r` does not exist); line ends of a patch never matter,
    since hunks are matched by line bodies and new lines take the file's own line end."""
    patch = patch.replace("\r\n", "\n")
    fenced = FENCE.search(patch)
    if fenced and "@@" in fenced.group(1):
        patch = fenced.group(1)
    return patch if patch.endswith("\n") else patch + "\n"


def _is_file_header(lines: list[str], j: int) -> bool:
    return lines[j].startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ ")


def _body_end(lines: list[str], start: int) -> int:
    """Index just past the hunk body that starts at `start`."""
    j = start
    while j < len(lines):
        line = lines[j]
        if line.startswith(("@@", "diff --git ")) or _is_file_header(lines, j):
            break
        if line[:1] in (" ", "+", "-", "\\"):
            j += 1
            continue
        if line in ("\n", "\r\n"):  # a blank context line that lost its leading space?
            k = j
            while k < len(lines) and lines[k] in ("\n", "\r\n"):
                k += 1
            if k < len(lines) and lines[k][:1] in (" ", "+", "-", "\\") and \
                    not _is_file_header(lines, k):
                j = k
                continue
        break
    return j


def fix_hunk_counts(patch: str, numbered: list[bool] | None = None) -> str:
    """Rewrite `@@` counts that disagree with their hunk bodies (see the module docstring).
    `numbered`, when given, gets one flag per hunk: whether its header had line numbers (a
    bare `@@` gets numbers here, but they say nothing about where the hunk goes)."""
    lines = patch.splitlines(keepends=True)
    out: list[str] = []
    last_text = max((j for j, x in enumerate(lines) if x.strip()), default=-1)
    i = 0
    while i < len(lines):
        m = HUNK.match(lines[i])
        bare = m is None and BARE_HUNK.match(lines[i]) is not None and i > 0
        if not m and not bare:
            out.append(lines[i])
            i += 1
            continue
        if numbered is not None:
            numbered.append(not bare)
        end = _body_end(lines, i + 1)
        body = [(" " + x if x in ("\n", "\r\n") else x) for x in lines[i + 1:end]]
        old = sum(1 for x in body if x[:1] in (" ", "-"))
        new = sum(1 for x in body if x[:1] in (" ", "+"))
        if bare:  # hunks are located by content, so the numbers are only a formality
            h_old, h_new = -1, -1
        else:
            h_old = int(m.group(2)) if m.group(2) is not None else 1
            h_new = int(m.group(4)) if m.group(4) is not None else 1
        at_end = end > last_text  # nothing but blank lines after this body
        header = lines[i]
        if (old, new) != (h_old, h_new) and (not at_end or (old >= h_old and new >= h_new)):
            s_start = int(m.group(1)) if m else (1 if old else 0)
            t_start = int(m.group(3)) if m else 1
            tail = m.group(5) if m else "\n"
            header = f"@@ -{s_start},{old} +{t_start},{new} @@{tail}"
            if not header.endswith("\n"):
                header += "\n"
        out.append(header)
        out.extend(body)
        i = end
    return "".join(out)
