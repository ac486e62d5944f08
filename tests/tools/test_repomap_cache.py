"""The repo map's cache (tools/repomap/store.py): outside the repository, no pickle, and any
damage to it (bit flips, truncation, garbage) costs a rebuild, never an error or a wrong map."""
from __future__ import annotations

import os
import pickle
import sqlite3

import pytest

from clover_cli.tools.registry import run_tool
from clover_cli.tools.statedir import repo_cache_dir

from .conftest import commit_all


def _repo(repo):
    (repo / "pkg").mkdir()
    (repo / "pkg" / "models.py").write_text(
        "class DatabaseModel:\n    def save_record(self):\n        pass\n\n"
        "def connect_database():\n    return DatabaseModel()\n")
    for i in range(3):
        (repo / f"view{i}.py").write_text(
            "from pkg.models import DatabaseModel, connect_database\n"
            f"def view_{i}():\n    DatabaseModel().save_record()\n    return connect_database()\n")
    commit_all(repo)


def _db(repo):
    return repo_cache_dir(repo, "repomap", create=False) / "cache.sqlite"


class _Boom:  # unpickling this runs code: the attack a shipped cache file could carry
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_shipped_pickle_is_never_loaded(git_repo, tmp_path):
    _repo(git_repo)
    marker = tmp_path / "pwned"
    shipped = git_repo / ".clover" / "repomap"
    shipped.mkdir(parents=True)
    for name in ("tags.pickle", "index.pickle", "results.pickle"):
        (shipped / name).write_bytes(pickle.dumps(_Boom(str(marker))))
    res = run_tool("repo_map", {}, git_repo)
    assert res.ok and "DatabaseModel" in res.output and res.details["parsed"] == 4
    assert not marker.exists()
    assert _db(git_repo).is_file()
    # what it writes is SQLite with JSON and numbers, nothing executable
    with sqlite3.connect(_db(git_repo)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"tags", "graph", "results"}


@pytest.mark.slow
def test_every_damaged_cache_is_rebuilt_with_the_same_map(git_repo):
    _repo(git_repo)
    good = run_tool("repo_map", {"budget_tokens": 500}, git_repo)
    assert good.ok and good.details["parsed"] == 4
    path = _db(git_repo)
    pristine = path.read_bytes()
    size = len(pristine)
    page = int.from_bytes(pristine[16:18], "big")
    positions = {int(size * k / 61) for k in range(61)} | {0, 16, 100, size - 1}
    positions |= {p + k for p in range(0, size, page) for k in (0, 1, 3, 5, 7, 100)} - {0}
    flips = [(p, 0xFF) for p in sorted(positions) if p < size]
    start = 0  # inside every stored value that names a definition: tags, graph, rendered map
    while (start := pristine.find(b"connect_database", start) + 1) > 0:
        flips.append((start + 3, 0x01))  # still valid text: only the checksum can tell
    rebuilt = 0
    for pos, bits in flips:
        data = bytearray(pristine)
        data[pos] ^= bits
        path.write_bytes(bytes(data))
        res = run_tool("repo_map", {"budget_tokens": 500}, git_repo)
        assert res.ok, (pos, res.output)
        assert res.output == good.output, pos
        rebuilt += bool(res.details.get("cache_rebuilt") or res.details.get("parsed"))
    assert rebuilt > 0  # some flips were noticed (the others hit unused bytes)
    for damaged in (pristine[: size // 2], pristine[:100], b"", b"\x00" * 4096,
                    b"SQLite format 3\x00" + os.urandom(3000)):
        path.write_bytes(damaged)
        res = run_tool("repo_map", {"budget_tokens": 500}, git_repo)
        assert res.ok and res.output == good.output
    # and after a rebuild the cache works again: the next call parses nothing
    again = run_tool("repo_map", {"budget_tokens": 500}, git_repo)
    assert again.output == good.output and again.details["parsed"] == 0


def test_damaged_rows_are_parsed_again_not_trusted(git_repo):
    _repo(git_repo)
    run_tool("repo_map", {}, git_repo)
    with sqlite3.connect(_db(git_repo)) as conn:  # a row whose checksum no longer matches
        conn.execute("UPDATE tags SET defs = '[[\"fake_name\", 1, \"function\", \"def x\", 0]]'"
                     " WHERE rel = 'pkg/models.py'")
        conn.execute("DELETE FROM graph")
        conn.execute("DELETE FROM results")
    res = run_tool("repo_map", {}, git_repo)
    assert res.ok and res.details["parsed"] == 1
    assert "fake_name" not in res.output and "DatabaseModel" in res.output


def test_an_unwritable_cache_dir_still_maps(git_repo, monkeypatch, tmp_path):
    _repo(git_repo)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    res = run_tool("repo_map", {}, git_repo)
    assert res.ok and "DatabaseModel" in res.output
