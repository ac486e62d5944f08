"""@path attachments (clover_cli/agent/attachments.py) and the fuzzy matcher, on real files."""
from __future__ import annotations

import os

from clover_cli.agent.attachments import MAX_FILE_CHARS, attach_mentions, mentioned_paths, strip_attachments
from clover_cli.tui.fuzzy import FileIndex, best, score


def test_mentions_are_paths_after_an_at_sign_not_emails():
    assert mentioned_paths("see @a.py and @src/b.py, mail me@host.org, @a.py again.") == ["a.py", "src/b.py"]


def test_attach_reads_text_files_inside_the_root_only(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("print('a')\n")
    (root / "bin.dat").write_bytes(b"\x00\x01binary")
    (root / "big.txt").write_text("x" * (MAX_FILE_CHARS + 50))
    (tmp_path / "secret.txt").write_text("top secret\n")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    text = "look at @a.py @bin.dat @../secret.txt @link.txt @missing.py @big.txt"
    full, attached = attach_mentions(text, root)
    assert attached == ["a.py", "big.txt"]
    assert full.startswith(text + "\n\nAttached file `a.py`:\n```\nprint('a')\n```")
    assert "top secret" not in full and "binary" not in full
    assert f"[cut: first {MAX_FILE_CHARS} of {MAX_FILE_CHARS + 50} characters" in full
    assert strip_attachments(full) == text
    assert attach_mentions("no mentions", root) == ("no mentions", [])


def test_fuzzy_prefers_file_names_and_runs(tmp_path):
    paths = ["src/calc.py", "docs/cache_and_logs.md", "calc.py", "scripts/c_a_l_c.sh", "greet.py"]
    assert best("ca", paths)[0] == "calc.py"
    assert best("calc", paths)[:2] == ["calc.py", "src/calc.py"]
    assert score("zz", "calc.py") is None and "greet.py" not in best("ca", paths)


def test_file_index_is_git_aware(tmp_path):
    import subprocess
    root = tmp_path / "r"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("")
    (root / "new.py").write_text("")
    files = FileIndex(root).files()
    assert "new.py" in files and "build/out.py" not in files
