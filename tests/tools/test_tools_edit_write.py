"""edit_file and write_file: exact and tolerant replacement, failures, line endings, modes."""
from __future__ import annotations

import stat

from clover_cli.tools.registry import preview, run_tool

SRC = "def a():\n    x = 1\n    return x\n\n\ndef b():\n    x = 1\n    return x + 1\n"


def test_unique_replace_and_non_unique_error(plain_dir):
    f = plain_dir / "m.py"
    f.write_text(SRC)
    res = run_tool("edit_file", {"path": "m.py", "old": "    x = 1\n", "new": "    x = 2\n"}, plain_dir)
    assert not res.ok and "occurs 2 times" in res.output and "lines 2, 7" in res.output
    assert f.read_text() == SRC
    res = run_tool("edit_file", {"path": "m.py", "old": "    return x + 1", "new": "    return x + 10"},
                   plain_dir)
    assert res.ok, res.output
    assert f.read_text() == SRC.replace("x + 1\n", "x + 10\n")
    res = run_tool("edit_file", {"path": "m.py", "old": "x = 1", "new": "x = 5", "replace_all": True},
                   plain_dir)
    assert res.ok and "2 occurrences" in res.output
    assert f.read_text().count("x = 5") == 2


def test_tolerant_indentation_and_trailing_whitespace(plain_dir):
    f = plain_dir / "m.py"
    f.write_text("class K:\n    def go(self):\n        y = 3   \n        return y\n")
    old = "def go(self):\n    y = 3\n    return y\n"  # the model dropped one indent level
    new = "def go(self):\n    y = 4\n    return y * 2\n"
    res = run_tool("edit_file", {"path": "m.py", "old": old, "new": new}, plain_dir)
    assert res.ok, res.output
    assert f.read_text() == "class K:\n    def go(self):\n        y = 4\n        return y * 2\n"


def test_failure_shows_closest_lines(plain_dir):
    (plain_dir / "m.py").write_text(SRC)
    res = run_tool("edit_file", {"path": "m.py", "old": "def b():\n    x = 100\n", "new": ""}, plain_dir)
    assert not res.ok and res.details["error"] == "edit_failed"
    assert "Closest lines in m.py (lines 5-8" in res.output and "def b():" in res.output


def test_crlf_preserved_by_edit_and_write(plain_dir):
    f = plain_dir / "w.txt"
    f.write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    assert run_tool("edit_file", {"path": "w.txt", "old": "beta\ngamma", "new": "BETA\nGAMMA\nDELTA"},
                    plain_dir).ok
    assert f.read_bytes() == b"alpha\r\nBETA\r\nGAMMA\r\nDELTA\r\n"
    assert run_tool("write_file", {"path": "w.txt", "content": "one\ntwo\n"}, plain_dir).ok
    assert f.read_bytes() == b"one\r\ntwo\r\n"


def test_write_file_creates_dirs_and_keeps_mode(plain_dir):
    res = run_tool("write_file", {"path": "deep/er/new.py", "content": "print(1)\n"}, plain_dir)
    assert res.ok and (plain_dir / "deep/er/new.py").read_text() == "print(1)\n"
    script = plain_dir / "s.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    assert run_tool("write_file", {"path": "s.sh", "content": "#!/bin/sh\necho\n"}, plain_dir).ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_binary_and_missing_files(plain_dir):
    (plain_dir / "b.bin").write_bytes(b"\x00\x01\x02abc")
    res = run_tool("edit_file", {"path": "b.bin", "old": "abc", "new": "xyz"}, plain_dir)
    assert not res.ok and "binary" in res.output
    res = run_tool("edit_file", {"path": "nope.py", "old": "a", "new": "b"}, plain_dir)
    assert not res.ok and "does not exist" in res.output


def test_latin1_file_round_trips(plain_dir):
    f = plain_dir / "l.txt"
    f.write_bytes("caf\xe9\nna\xefve\n".encode("latin-1"))
    assert run_tool("edit_file", {"path": "l.txt", "old": "na", "new": "NA"}, plain_dir).ok
    assert f.read_bytes() == "caf\xe9\nNA\xefve\n".encode("latin-1")


def test_preview_is_a_diff_and_writes_nothing(plain_dir):
    f = plain_dir / "m.py"
    f.write_text(SRC)
    text = preview("edit_file", {"path": "m.py", "old": "x + 1", "new": "x + 2"}, plain_dir)
    assert "--- a/m.py" in text and "-    return x + 1" in text and "+    return x + 2" in text
    assert f.read_text() == SRC
    assert "would fail" in preview("edit_file", {"path": "m.py", "old": "zzz", "new": "q"}, plain_dir)
    assert preview("run_shell", {"command": "make test"}, plain_dir) == "$ make test"
    new = preview("write_file", {"path": "n.txt", "content": "hi\n"}, plain_dir)
    assert "--- /dev/null" in new and "+hi" in new and not (plain_dir / "n.txt").exists()


def test_lone_surrogates_are_replaced_never_a_crash(plain_dir):
    """Lone surrogates in a call are replaced (U+FFFD) at the tool boundary, so the
    write and the session log never hit UnicodeEncodeError."""
    from clover_cli.tools.registry import run_tool as _run
    res = _run("write_file", {"path": "s.txt", "content": "a\ud800b"}, plain_dir)
    assert res.ok, res.output
    assert (plain_dir / "s.txt").read_text(encoding="utf-8") == "a\ufffdb"
    res = _run("write_file", {"path": "\ud800.txt", "content": "x"}, plain_dir)
    assert res.details.get("error") != "internal"
    assert all("\ud800" not in p.name for p in plain_dir.iterdir())


def test_write_note_counts_in_singular_and_plural(tmp_path):
    from clover_cli.tools.edit import write_file
    one = write_file(tmp_path, "one.txt", "hello\n")
    assert one.ok and "(6 bytes, 1 line)" in one.output, one.output
    two = write_file(tmp_path, "two.txt", "a\nb\n")
    assert "(4 bytes, 2 lines)" in two.output, two.output
    single = write_file(tmp_path, "x.txt", "x")
    assert "(1 byte, 1 line)" in single.output, single.output
