"""Reads that keep only a part read only that part (attachments), and a write killed halfway
leaves no temporary file behind for long (docs/tools.md, "Bounds")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clover_cli.tools.registry import run_tool

BIG = 12 * 1024 * 1024

_MEASURE = """
import json, sys
from pathlib import Path
from clover_cli.agent.attachments import attach_mentions
def rchar():
    return int(next(l for l in open('/proc/self/io') if l.startswith('rchar:')).split()[1])
before = rchar()
text, attached = attach_mentions('look at @big.txt', Path(sys.argv[1]))
print(json.dumps({"read": rchar() - before, "attached": attached, "tail": text[-200:]}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_an_attachment_reads_only_what_it_keeps(tmp_path):
    big = tmp_path / "big.txt"
    with open(big, "wb") as fh:  # 64 MiB of text (sparse would be NULs: binary)
        fh.write(b"abcdefgh\n" * (64 * 1024 * 1024 // 9))
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["attached"] == ["big.txt"]
    assert "characters of a" in got["tail"] and "read_file shows the rest" in got["tail"]
    assert got["read"] < 1024 * 1024, got  # the whole file is 64 MiB


_KILLED_WRITE = """
import os, signal, sys
from pathlib import Path
from clover_cli.tools.registry import run_tool
real_fsync = os.fsync
def fsync(fd):  # the moment a kill lands worst: the temporary file is full, not yet renamed
    where = os.readlink(f"/proc/self/fd/{fd}")
    if os.path.basename(where).startswith(".clover-") and os.path.dirname(where).endswith("/repo/data"):
        os.kill(os.getpid(), signal.SIGKILL)
    real_fsync(fd)
os.fsync = fsync
run_tool("write_file", {"path": "data/big.txt", "content": "y" * %d}, Path(sys.argv[1]))
""" % BIG


@pytest.mark.timeout(120)
def test_a_write_killed_halfway_leaves_its_temporary_file_only_until_the_next_write(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    (root / "data" / "big.txt").write_text("original\n")
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITE, str(root)], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    temps = [p.name for p in (root / "data").iterdir() if p.name.startswith(".clover-")]
    assert len(temps) == 1 and (root / "data" / temps[0]).stat().st_size == BIG
    assert (root / "data" / "big.txt").read_text() == "original\n"  # the target is intact
    result = run_tool("write_file", {"path": "notes.txt", "content": "next\n"}, root)  # another folder
    assert result.ok, result.output
    assert [p.name for p in (root / "data").iterdir()] == ["big.txt"]
    assert (root / "data" / "big.txt").read_text() == "original\n"
