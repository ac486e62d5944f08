"""read_file, list_files and grep on real trees, in git and outside."""
from __future__ import annotations

from clover_cli.tools.registry import run_tool

from .conftest import commit_all


def test_read_file_numbers_ranges_and_caps(plain_dir):
    (plain_dir / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    res = run_tool("read_file", {"path": "big.txt", "start_line": 10, "end_line": 12}, plain_dir)
    assert res.ok and res.output == "    10\tline 10\n    11\tline 11\n    12\tline 12"
    res = run_tool("read_file", {"path": "big.txt"}, plain_dir)
    assert res.ok and res.details["truncated"] and res.details["end_line"] == 2000
    assert "start_line=2001" in res.output and "of 5000" in res.output
    res = run_tool("read_file", {"path": "big.txt", "start_line": 6000}, plain_dir)
    assert not res.ok and "past the end" in res.output


def test_read_file_crlf_invalid_utf8_long_lines(plain_dir):
    (plain_dir / "w.txt").write_bytes(b"a\r\nb\xff\r\n" + b"x" * 5000 + b"\n")
    res = run_tool("read_file", {"path": "w.txt"}, plain_dir)
    lines = res.output.split("\n")
    # not utf-8: shown as latin-1, the way edit_file will match it
    assert lines[0] == "     1\ta" and lines[1] == "     2\tb\u00ff"
    assert "3000 more characters" in lines[2]


def test_read_file_binary_directory_missing(plain_dir):
    (plain_dir / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(100))
    (plain_dir / "sub").mkdir()
    res = run_tool("read_file", {"path": "img.png"}, plain_dir)
    assert not res.ok and res.details["error"] == "binary"
    assert run_tool("read_file", {"path": "sub"}, plain_dir).details["error"] == "is_directory"
    assert run_tool("read_file", {"path": "nope"}, plain_dir).details["error"] == "not_found"
    assert run_tool("read_file", {"path": "sub/../img.png"}, plain_dir).details["error"] == "binary"


def test_missing_paths_suggest_close_repository_paths(git_repo):
    """A mistyped path (the bundled model writes `shop/priding.py` for `shop/prices.py`) gets up
    to three close paths of the right kind; ignored files are never suggested."""
    for rel in ("shop/__init__.py", "shop/inventory.py", "shop/prices.py", "lib/storage/cache.py"):
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text("x = 1\n")
    (git_repo / ".gitignore").write_text("secret_prices.py\n")
    (git_repo / "shop" / "secret_prices.py").write_text("")
    commit_all(git_repo)
    res = run_tool("read_file", {"path": "shop/priding.py"}, git_repo)
    assert not res.ok and res.details["error"] == "not_found"
    assert res.output == "shop/priding.py does not exist. Did you mean shop/prices.py?"
    # the right name in the wrong directory
    assert run_tool("read_file", {"path": "lib_storage/cache.py"}, git_repo).output.endswith(
        "Did you mean lib/storage/cache.py?")
    assert run_tool("read_file", {"path": "prices.py"}, git_repo).output.endswith(
        "Did you mean shop/prices.py?")
    # directories for list_files, either kind for grep
    assert run_tool("list_files", {"path": "lib/storge"}, git_repo).output == (
        "lib/storge does not exist. Did you mean lib/storage?")
    assert run_tool("grep", {"pattern": "x", "path": "shopp"}, git_repo).output.endswith(
        "Did you mean shop?")
    # nothing close: the plain message
    assert run_tool("read_file", {"path": "zzz/qqq.txt"}, git_repo).output == "zzz/qqq.txt does not exist."


def test_list_files_git_honours_gitignore(git_repo):
    (git_repo / ".gitignore").write_text("*.log\nbuild/\n")
    (git_repo / "src").mkdir()
    (git_repo / "src" / "a.py").write_text("")
    (git_repo / "src" / "b.txt").write_text("")
    (git_repo / "debug.log").write_text("")
    (git_repo / "build").mkdir()
    (git_repo / "build" / "out.py").write_text("")
    commit_all(git_repo)
    (git_repo / "untracked.py").write_text("")  # untracked but not ignored: listed
    run_tool("write_file", {"path": "src/c.py", "content": ""}, git_repo)  # creates .clover/
    res = run_tool("list_files", {}, git_repo)
    assert res.output.splitlines() == [".gitignore", "README.md", "src/a.py", "src/b.txt",
                                       "src/c.py", "untracked.py"]
    res = run_tool("list_files", {"pattern": "*.py"}, git_repo)
    assert res.details["files"] == ["src/a.py", "src/c.py", "untracked.py"]
    res = run_tool("list_files", {"path": "src", "pattern": "src/*.txt"}, git_repo)
    assert res.details["files"] == ["src/b.txt"]


def test_list_files_outside_git_and_cap(plain_dir):
    (plain_dir / "node_modules" / "x").mkdir(parents=True)
    (plain_dir / "node_modules" / "x" / "i.js").write_text("")
    (plain_dir / ".gitignore").write_text("secret*\n")
    (plain_dir / "secret.txt").write_text("")
    (plain_dir / "many").mkdir()
    for i in range(600):
        (plain_dir / "many" / f"f{i:03d}.txt").write_text("")
    res = run_tool("list_files", {}, plain_dir)
    assert res.details["count"] == 601 and res.details["truncated"]
    assert "node_modules" not in res.output and "secret" not in res.output
    assert "601 files; showing the first 500" in res.output
    res = run_tool("list_files", {"pattern": "many/**/f59?.txt"}, plain_dir)
    assert res.details["files"] == [f"many/f59{i}.txt" for i in range(10)]


def test_grep_regex_glob_case_and_counts(git_repo):
    (git_repo / "a.py").write_text("def Foo():\n    return foo_bar\n")
    (git_repo / "b.txt").write_text("FOO here\nnothing\n")
    (git_repo / "bin.dat").write_bytes(b"foo\x00foo")
    commit_all(git_repo)
    res = run_tool("grep", {"pattern": r"fo+\w*"}, git_repo)
    assert res.output.splitlines()[0] == "a.py:2:     return foo_bar"
    assert res.details["matches"] == 1 and res.details["engine"] in ("python", "ripgrep")
    res = run_tool("grep", {"pattern": "foo", "ignore_case": True, "glob": "*.txt"}, git_repo)
    assert res.output.splitlines()[0] == "b.txt:1: FOO here"
    res = run_tool("grep", {"pattern": "nomatchzzz"}, git_repo)
    assert res.ok and res.details["matches"] == 0
    res = run_tool("grep", {"pattern": "("}, git_repo)
    assert not res.ok and "invalid regular expression" in res.output


def test_grep_caps_and_skips_clover_state(plain_dir):
    (plain_dir / "many.txt").write_text("hit\n" * 500)
    run_tool("write_file", {"path": "x.txt", "content": "hit\n"}, plain_dir)
    run_tool("write_file", {"path": "x.txt", "content": "hit again\n"}, plain_dir)  # checkpoint has "hit"
    res = run_tool("grep", {"pattern": "hit"}, plain_dir)
    assert res.details["matches"] == 501 and res.details["files"] == 2 and res.details["truncated"]
    assert "[501 matches in 2 files; showing the first 200" in res.output
    assert ".clover" not in res.output


def test_ripgrep_and_python_agree_when_rg_is_installed(git_repo):
    import shutil

    import pytest

    from clover_cli.tools.grep import _python_grep, _ripgrep
    from clover_cli.tools.grepsearch import compile_pattern
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed here; the Python engine is covered above")
    (git_repo / "a.py").write_text("alpha\nbeta alpha\n")
    (git_repo / "sub").mkdir()
    (git_repo / "sub" / "b.txt").write_text("ALPHA\n")
    root = git_repo.resolve()
    assert _ripgrep(root, root, "alpha", None, True) == _python_grep(root, root, compile_pattern("alpha", True), None)


def test_grep_without_matches_suggests_close_names(git_repo):
    """An empty search for a mistyped name (the bundled model stutters `onon_validate_error`)
    names up to three close identifiers with where they are defined or first used; a definition
    search whose name exists but not as a def/class line says so."""
    (git_repo / "shop").mkdir()
    (git_repo / "shop" / "inventory.py").write_text(
        "STOCK = {}\n\n\ndef restock_shelf(shelf, count):\n    return count\n\n\n"
        "class ShelfError(Exception):\n    pass\n")
    (git_repo / "shop" / "prices.py").write_text(
        "from shop.inventory import restock_shelf\n\nrestock_shelf('a', 1)\n")
    (git_repo / "notes.txt").write_text("restock_shelves happens on mondays\n")
    commit_all(git_repo)
    res = run_tool("grep", {"pattern": "(def|class) restock_shelve"}, git_repo)
    assert res.ok and res.details["matches"] == 0
    # a definition search suggests definitions only (not the word in notes.txt)
    assert res.output == ("No matches for '(def|class) restock_shelve'. Did you mean "
                          "restock_shelf (defined at shop/inventory.py:4)?")
    assert res.details["suggestions"] == [
        {"name": "restock_shelf", "path": "shop/inventory.py", "line": 4, "defined": True}]
    # a plain name: any identifier, definitions reported as such
    res = run_tool("grep", {"pattern": "restok_shelves"}, git_repo)
    assert "restock_shelves (first used at notes.txt:1)" in res.output
    assert "restock_shelf (defined at shop/inventory.py:4)" in res.output
    # a different case only
    assert run_tool("grep", {"pattern": "shelferror"}, git_repo).output.endswith(
        "Did you mean ShelfError (defined at shop/inventory.py:8)?")
    # there, but never defined by a def/class line
    res = run_tool("grep", {"pattern": "(def|class) STOCK"}, git_repo)
    assert res.output == ("No matches for '(def|class) STOCK'. STOCK occurs in the code but no "
                          "def or class line defines it; first at shop/inventory.py:1. Search for "
                          "the name alone to see every use.")
    # path and glob limit where names are looked for; regexes and far names get no guess
    assert "Did you mean" not in run_tool(
        "grep", {"pattern": "restock_shelve", "glob": "*.txt", "path": "shop"}, git_repo).output
    assert run_tool("grep", {"pattern": "restock_.*zz"}, git_repo).output == \
        "No matches for 'restock_.*zz'."
    assert run_tool("grep", {"pattern": "quantum_flux"}, git_repo).output == \
        "No matches for 'quantum_flux'."


def test_grep_suggestions_follow_case_spacing_and_the_searched_files(git_repo, monkeypatch):
    """ignore_case compares without case; a definition the pattern's spacing missed is reported;
    names come only from files the search read (ripgrep skips hidden files), so every suggestion
    is found by the next grep."""
    import shutil

    (git_repo / "stock.py").write_text("STOCK_LEVEL = 3\n\n\ndef  real_func():\n    pass\n")
    (git_repo / ".github").mkdir()
    (git_repo / ".github" / "conf.py").write_text("DEPLOY_TOKEN_NAME = 'x'\n")
    commit_all(git_repo)
    res = run_tool("grep", {"pattern": "stock_levl", "ignore_case": True}, git_repo)
    assert res.output.endswith("Did you mean STOCK_LEVEL (first used at stock.py:1)?")
    res = run_tool("grep", {"pattern": "(def|class) stock_level", "ignore_case": True}, git_repo)
    assert "STOCK_LEVEL occurs in the code but no def or class line defines it" in res.output
    res = run_tool("grep", {"pattern": "def real_func"}, git_repo)  # the file has two spaces
    assert res.output.endswith("Did you mean real_func (defined at stock.py:4)?")
    # `\b` around the name keeps a definition search a definition search
    assert run_tool("grep", {"pattern": r"def \breal_func\b"}, git_repo).details["suggestions"] \
        == [{"name": "real_func", "path": "stock.py", "line": 4, "defined": True}]
    for engine_present in ([True] if shutil.which("rg") else []) + [False]:
        if not engine_present:
            monkeypatch.setattr("clover_cli.tools.grep.shutil.which", lambda _: None)
        res = run_tool("grep", {"pattern": "DEPLOY_TOKEN_NAMX"}, git_repo)
        if res.details["engine"] == "ripgrep":  # ripgrep does not search hidden files
            assert res.details["suggestions"] == []
            assert run_tool("grep", {"pattern": "DEPLOY_TOKEN_NAME"}, git_repo).details["matches"] == 0
        else:
            assert res.details["suggestions"][0]["name"] == "DEPLOY_TOKEN_NAME"
            assert run_tool("grep", {"pattern": "DEPLOY_TOKEN_NAME"}, git_repo).details["matches"] == 1


def test_globs_braces_literal_brackets_and_clear_errors(git_repo):
    """`{a,b}` alternatives (as ripgrep reads them), a literal `]` first in a class, and a glob
    that cannot be compiled is a one-line error naming it, not an internal failure."""
    from clover_cli.tools.globmatch import glob_match

    assert glob_match("src/a.py", "*.{py,txt}") and glob_match("notes.txt", "*.{py,txt}")
    assert not glob_match("a.md", "*.{py,txt}")
    assert glob_match("src/x/a.py", "src/**/*.{py,pyi}") and glob_match("]a.py", "[]]a.py")
    assert glob_match("b.py", "[!a].py") and not glob_match("a.py", "[!a].py")
    (git_repo / "a.py").write_text("x = 1\n")
    (git_repo / "b.txt").write_text("x = 2\n")
    commit_all(git_repo)
    assert run_tool("list_files", {"pattern": "*.{py,txt}"}, git_repo).details["files"] == [
        "a.py", "b.txt"]
    assert run_tool("grep", {"pattern": "x =", "glob": "*.{py,txt}"}, git_repo).details["files"] == 2
    for tool, args in (("list_files", {"pattern": "[z-a].py"}),
                       ("grep", {"pattern": "x", "glob": "[z-a].py"})):
        res = run_tool(tool, args, git_repo)
        assert not res.ok and res.details["error"] == "glob"
        assert res.output == "invalid glob '[z-a].py': bad character range z-a"
