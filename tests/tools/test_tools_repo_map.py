"""repo_map on small real repositories: definitions, ranking toward focus files, the budget,
the mtime cache, and the PageRank against a dense reference computation."""
from __future__ import annotations

import os

import numpy as np
from tree_sitter import Parser

from clover_cli.tools.registry import run_tool
from clover_cli.tools.repomap.languages import load_language
from clover_cli.tools.statedir import repo_cache_dir
from clover_cli.tools.repomap.rank import build_graph, pagerank
from clover_cli.tools.repomap.tags import python_tags, query_tags

from .conftest import commit_all

SOURCE = b'''import os

LIMIT = 10
TABLE = {
    'a': 1,
}

@decorator
class Engine(Base):
    """Doc."""
    def start(self, fuel: int = 0) -> bool:  # a comment
        def inner():
            pass
        return True

    @property
    def speed(self):
        return LIMIT

async def drive(car):
    return car.start()

if os.name == "posix":
    def posix_only():
        pass
'''


def test_python_definitions_from_the_tree():
    tags = python_tags(SOURCE, Parser(load_language("tree_sitter_python", "language")))
    got = [(d.name, d.line, d.kind, d.text, d.parent_line) for d in tags.defs]
    assert got == [
        ("LIMIT", 3, "constant", "LIMIT = 10", 0),
        ("TABLE", 4, "constant", "TABLE = ...", 0),
        ("Engine", 9, "class", "class Engine(Base):", 0),
        ("start", 11, "method", "    def start(self, fuel: int = 0) -> bool:", 9),
        ("speed", 17, "method", "    def speed(self):", 9),
        ("drive", 20, "function", "async def drive(car):", 0),
        ("posix_only", 24, "function", "    def posix_only():", 0),
    ]
    assert tags.refs["LIMIT"] == 2 and tags.refs["start"] == 2 and "self" not in tags.refs


def test_generic_tags_query_agrees_with_the_python_walker():
    """The path used for other languages (our tag queries, queries.py) on Python itself."""
    fast = python_tags(SOURCE, Parser(load_language("tree_sitter_python", "language")))
    generic = query_tags(SOURCE, "tree_sitter_python", "language")
    names = {d.name for d in generic.defs}
    assert {"Engine", "start", "speed", "drive", "posix_only", "LIMIT", "TABLE"} <= names
    assert "inner" in names  # the query sees nested functions too; the walker skips them
    assert {d.name for d in fast.defs} <= names


def test_pagerank_matches_dense_power_iteration():
    defs = [{"alpha_helper"}, {"BetaThing"}, {"gamma"}, set()]
    refs = [{"BetaThing": 4}, {"gamma": 1, "alpha_helper": 2, "BetaThing": 7}, {"alpha_helper": 1},
            {"gamma": 9}]  # file 1 using its own BetaThing is no evidence and is left out
    g, vocab = build_graph(defs, refs)
    person = np.array([1.0, 0.0, 0.0, 3.0])
    x, flow = pagerank(g, person, max_iter=500, tol=1e-14)
    n = 4
    w = np.zeros((n, n))  # dense A->B weights: mul * sqrt(count), split over definers
    for a, r in enumerate(refs):
        for name, c in r.items():
            definers = [b for b in range(n) if name in defs[b]]
            if definers == [a]:
                continue
            mul = 10.0 if name in ("alpha_helper", "BetaThing") else 1.0
            for b in definers:
                w[a, b] += mul * np.sqrt(c) / len(definers)
    p = person / person.sum()
    out = w.sum(1)
    t = np.where(out[:, None] > 0, w / np.where(out > 0, out, 1)[:, None], 0)
    v = p.copy()
    for _ in range(2000):
        v = 0.85 * (v @ t + v[out == 0].sum() * p) + 0.15 * p
    assert np.allclose(x, v, atol=1e-10) and abs(x.sum() - 1) < 1e-9
    assert flow.shape == (len(vocab),)


def _repo(git_repo):
    (git_repo / "core").mkdir()
    (git_repo / "core" / "models.py").write_text(
        "class DatabaseModel:\n    def save_record(self):\n        pass\n\n"
        "def connect_database():\n    return DatabaseModel()\n")
    (git_repo / "core" / "render.py").write_text(
        "def render_template(name):\n    return name\n\nclass TemplateEngine:\n    pass\n")
    for i in range(4):
        (git_repo / f"view{i}.py").write_text(
            "from core.models import DatabaseModel, connect_database\n"
            f"def view_{i}():\n    DatabaseModel().save_record()\n    return connect_database()\n")
    (git_repo / "page.py").write_text(
        "from core.render import render_template, TemplateEngine\n"
        "def page():\n    return render_template(TemplateEngine())\n")
    (git_repo / "notes.txt").write_text("class NotCode: pass\n")
    commit_all(git_repo)


def test_ranking_focus_budget_and_cache(git_repo):
    _repo(git_repo)
    res = run_tool("repo_map", {}, git_repo)
    assert res.ok and res.details["files"] == 7 and res.details["parsed"] == 7
    lines = res.output.splitlines()
    assert lines[1] == "core/models.py:"  # referenced by four views
    assert "    1│class DatabaseModel:" in lines and "    5│def connect_database():" in lines
    assert "NotCode" not in res.output
    focused = run_tool("repo_map", {"paths": ["page.py"]}, git_repo)
    assert focused.output.splitlines()[1] == "core/render.py:"
    assert "ranked toward page.py" in focused.output
    small = run_tool("repo_map", {"budget_tokens": 40}, git_repo)
    assert small.details["tokens"] <= 40 and 0 < small.details["definitions"] < res.details["definitions"]
    # warm: nothing parsed again; a changed file is parsed again, alone
    again = run_tool("repo_map", {"paths": ["view0.py"]}, git_repo)
    assert again.details["parsed"] == 0
    target = git_repo / "core" / "render.py"
    target.write_text(target.read_text() + "\ndef brand_new_function():\n    pass\n")
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    changed = run_tool("repo_map", {"budget_tokens": 4000}, git_repo)
    assert changed.details["parsed"] == 1 and "brand_new_function" in changed.output
    assert not (git_repo / ".clover").exists()  # the cache lives in the user's cache dir
    assert (repo_cache_dir(git_repo, "repomap", create=False) / "cache.sqlite").is_file()


def test_map_outside_git_and_errors(plain_dir):
    (plain_dir / "a.py").write_text("def only_function():\n    pass\n")
    res = run_tool("repo_map", {}, plain_dir)
    assert res.ok and "only_function" in res.output
    assert not run_tool("repo_map", {"budget_tokens": 3}, plain_dir).ok
    empty = plain_dir / "empty"
    empty.mkdir()
    assert "No source files" in run_tool("repo_map", {}, empty).output


def test_worker_processes_give_the_same_tags(plain_dir):
    from clover_cli.tools.repomap.cache import POOL_THRESHOLD, _extract_many, parse_files
    rels = []
    for i in range(POOL_THRESHOLD + 6):
        (plain_dir / f"m{i}.py").write_text(f"class Thing{i}:\n    def run_{i}(self):\n        return Thing{i + 1}\n")
        rels.append(f"m{i}.py")
    pooled = parse_files(plain_dir, rels)
    serial = dict(_extract_many(str(plain_dir), rels))
    assert set(pooled) == set(rels)
    for rel in rels:
        assert pooled[rel].defs == serial[rel].defs and pooled[rel].refs == serial[rel].refs


def test_file_cap_keeps_focus_files(plain_dir, monkeypatch):
    import clover_cli.tools.repomap as repomap
    monkeypatch.setattr(repomap, "MAX_FILES", 3)
    for i in range(6):
        (plain_dir / f"m{i}.py").write_text(f"def function_number_{i}():\n    pass\n")
    res = run_tool("repo_map", {"paths": ["m5.py"], "budget_tokens": 2000}, plain_dir)
    assert res.details["files"] == 3 and "3 more source files; not mapped" in res.output
    assert "function_number_5" in res.output and "function_number_4" not in res.output
