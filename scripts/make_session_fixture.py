#!/usr/bin/env python
"""Record the 20-step agent session that `clover bench --session` replays.

    .venv/bin/python scripts/make_session_fixture.py [OUT.json]
    (default OUT: clover_cli/bench/session_replay.json)

The repository is a throw-away copy of the installed click package (as src/click) with one
regression put in (Choice's case-insensitive match uses lower() instead of casefold()), a small
test suite and a git commit of that state. The assistant turns are written here; every tool
result is the real output of Clover's own tools (clover_cli.tools.registry.run_tool) on that
copy, kept as the agent keeps it (clover_cli/agent/context.py truncate_output), so the sizes are
those a session sees: source reads of 1-4K tokens, grep, repo_map and pytest output. The system
prompt and tool schemas are the agent's own (clover_cli/agent/instructions.py, tools/registry.py).

What varies from machine to machine is replaced by fixed text: the temporary root becomes
ROOT below, the interpreter's folders become /home/dev/.venv, pytest's timings read 0.05s.
The script prints the context size per step with the bundled tokenizer.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = "/home/dev/click-demo"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "clover_cli" / "training" / "session_replay.json"
TASK = ("Our option `--city` uses click.Choice(..., case_sensitive=False), but `--city STRASSE` is "
        "rejected although `Straße` is one of the choices (tests/test_choice.py::test_casefold_choice "
        "fails). Find the cause in src/click, fix it, and make sure tab completion matches the same "
        "way. Keep the other tests passing.")

TEST_CHOICE = '''import enum

import click
from click.testing import CliRunner


@click.command()
@click.option("--city", type=click.Choice(["Straße", "Köln", "Berlin"], case_sensitive=False))
def where(city):
    click.echo(city)


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"


@click.command()
@click.option("--color", type=click.Choice(Color, case_sensitive=False))
def paint(color):
    click.echo(color.name)


def test_exact_choice():
    result = CliRunner().invoke(where, ["--city", "Berlin"])
    assert result.exit_code == 0
    assert result.output == "Berlin\\n"


def test_case_insensitive_choice():
    result = CliRunner().invoke(where, ["--city", "köln"])
    assert result.exit_code == 0
    assert result.output == "Köln\\n"


def test_casefold_choice():
    # "STRASSE".casefold() == "Straße".casefold() == "strasse"
    result = CliRunner().invoke(where, ["--city", "STRASSE"])
    assert result.exit_code == 0, result.output
    assert result.output == "Straße\\n"


def test_enum_choice():
    result = CliRunner().invoke(paint, ["--color", "green"])
    assert result.exit_code == 0
    assert result.output == "GREEN\\n"


def test_invalid_choice_lists_the_choices():
    result = CliRunner().invoke(where, ["--city", "Paris"])
    assert result.exit_code == 2
    assert "'Paris' is not one of 'strasse', 'köln', 'berlin'" in result.output
'''

TEST_OPTIONS = '''import click
from click.testing import CliRunner


@click.command()
@click.option("--count", default=1, type=click.IntRange(1, 5))
@click.option("--name", required=True)
@click.option("--shout/--no-shout", default=False)
def greet(count, name, shout):
    text = f"Hello {name}!"
    for _ in range(count):
        click.echo(text.upper() if shout else text)


def test_defaults():
    result = CliRunner().invoke(greet, ["--name", "Ada"])
    assert result.output == "Hello Ada!\\n"


def test_count_and_flag():
    result = CliRunner().invoke(greet, ["--name", "Ada", "--count", "2", "--shout"])
    assert result.output == "HELLO ADA!\\nHELLO ADA!\\n"


def test_count_out_of_range():
    result = CliRunner().invoke(greet, ["--name", "Ada", "--count", "9"])
    assert result.exit_code == 2
    assert "9 is not in the range 1<=x<=5" in result.output


def test_missing_name():
    result = CliRunner().invoke(greet, [])
    assert result.exit_code == 2
    assert "Missing option '--name'" in result.output
'''

COMPLETION_TEST = '''

def test_completion_casefolds():
    ctx = click.Context(where)
    param = where.params[0]
    # "Straß".casefold() == "strass", a prefix of the casefolded choice "strasse"
    items = param.type.shell_complete(ctx, param, "Straß")
    assert [item.value for item in items] == ["strasse"]
'''

PYPROJECT = '''[project]
name = "click-demo"
version = "0.1.0"
requires-python = ">=3.10"

[tool.pytest.ini_options]
pythonpath = ["src"]
testpaths = ["tests"]
'''

COMPLETE_OLD = '''            incomplete = incomplete.lower()
            matched = (c for c in str_choices if c.lower().startswith(incomplete))'''
COMPLETE_NEW = '''            incomplete = incomplete.casefold()
            matched = (c for c in str_choices if c.casefold().startswith(incomplete))'''
PYTEST = "python -m pytest -q -p no:cacheprovider"

# (what the assistant says before its call, tool, arguments); results come from running them
STEPS: list[tuple[str, str, dict]] = [
    ("I'll run the tests first to see the failure.", "run_shell", {"command": f"{PYTEST} tests"}),
    ("", "read_file", {"path": "tests/test_choice.py"}),
    ("The choice is matched in click's Choice type. Let me see where things are.", "repo_map",
     {"paths": ["src/click/types.py"], "budget_tokens": 250}),
    ("", "grep", {"pattern": "case_sensitive", "path": "src/click"}),
    ("", "read_file", {"path": "src/click/types.py", "start_line": 342, "end_line": 435}),
    ("normalize_choice folds the case. Who else calls it?", "grep",
     {"pattern": "normalize_choice", "path": "src"}),
    ("", "grep", {"pattern": "token_normalize_func", "path": "src/click/core.py"}),
    ("", "read_file", {"path": "src/click/core.py", "start_line": 240, "end_line": 275}),
    ("Let me check how lower() and casefold() treat the sharp s.", "run_shell",
     {"command": "python -c \"for s in ('Straße', 'STRASSE'): print(s, s.lower(), s.casefold())\""}),
    ("lower() keeps 'ß', casefold() turns it into 'ss', so the case-insensitive match must use "
     "casefold().", "edit_file",
     {"path": "src/click/types.py", "old": "            normed_value = normed_value.lower()",
      "new": "            normed_value = normed_value.casefold()"}),
    ("", "run_shell", {"command": f"{PYTEST} tests/test_choice.py"}),
    ("Now the completion side: does it fold the same way?", "grep",
     {"pattern": r"\.lower\(\)", "path": "src/click"}),
    ("", "read_file", {"path": "src/click/shell_completion.py", "start_line": 566, "end_line": 612}),
    ("Choice.shell_complete compares with lower(); make it casefold() like normalize_choice.",
     "edit_file", {"path": "src/click/types.py", "old": COMPLETE_OLD, "new": COMPLETE_NEW}),
    ("I'll add a test for the completion.", "edit_file",
     {"path": "tests/test_choice.py",
      "old": "    assert \"'Paris' is not one of 'strasse', 'köln', 'berlin'\" in result.output\n",
      "new": "    assert \"'Paris' is not one of 'strasse', 'köln', 'berlin'\" in result.output\n"
             + COMPLETION_TEST}),
    ("", "run_shell", {"command": f"{PYTEST} tests/test_choice.py"}),
    ("", "read_file", {"path": "src/click/types.py", "start_line": 406, "end_line": 425}),
    ("", "run_shell", {"command": f"{PYTEST} tests"}),
    ("", "list_files", {"path": "tests"}),
    ("Everything passes. Here is the final change.", "run_shell", {"command": "git diff"}),
]


def make_repo(base: Path) -> Path:
    """The throw-away repository: click's source with the regression, tests, one commit."""
    import click

    root = base / "click-demo"
    shutil.copytree(Path(click.__file__).parent, root / "src" / "click",
                    ignore=shutil.ignore_patterns("__pycache__"))
    types_py = root / "src" / "click" / "types.py"
    text = types_py.read_text()
    good = "            normed_value = normed_value.casefold()"
    if text.count(good) != 1 or text.count(COMPLETE_OLD) != 1:
        sys.exit("make_session_fixture: this click version's Choice differs from the one the "
                 "session was written for")
    types_py.write_text(text.replace(good, "            normed_value = normed_value.lower()"))
    (root / "tests").mkdir()
    (root / "tests" / "test_choice.py").write_text(TEST_CHOICE)
    (root / "tests" / "test_options.py").write_text(TEST_OPTIONS)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "README.md").write_text("# click-demo\n\nA vendored click with our CLI's tests.\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="dev", GIT_AUTHOR_EMAIL="dev@example.com",
               GIT_COMMITTER_NAME="dev", GIT_COMMITTER_EMAIL="dev@example.com",
               GIT_AUTHOR_DATE="2026-01-05T10:00:00", GIT_COMMITTER_DATE="2026-01-05T10:00:00")
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                ["git", "commit", "-q", "-m", "click-demo: vendored click and tests"]):
        subprocess.run(cmd, cwd=root, env=env, check=True)
    return root


def stable(text: str, root: Path) -> str:
    """Machine-specific paths and timings replaced by fixed text."""
    venv = str(Path(sys.prefix))
    for path, shown in ((str(root), ROOT), (os.path.realpath(root), ROOT),
                        (sysconfig.get_paths()["purelib"], "/home/dev/.venv/lib/python3.11/site-packages"),
                        (venv, "/home/dev/.venv")):
        text = text.replace(path, shown)
    text = re.sub(r"in \d+\.\d+s", "in 0.05s", text)
    return text


def record(root: Path) -> list[dict]:
    """Runs the steps' calls on the repository; returns [{"assistant", "tool"}, ...]."""
    from clover_cli.agent.context import truncate_output
    from clover_cli.agent.prompt_files import observation
    from clover_cli.tools.registry import run_tool

    max_output_chars = 12000  # AgentConfig.max_output_chars
    steps = []
    for k, (say, name, args) in enumerate(STEPS, start=1):
        result = run_tool(name, args, root, timeout=120)
        output = truncate_output(stable(result.output or observation("empty_output"), root),
                                 max_output_chars)
        call_id = f"call_1_{k}"
        call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        text = (say + "\n" if say else "") + f"<tool_call>{call}</tool_call>"
        steps.append({
            "assistant": {"role": "assistant", "content": text, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]},
            "tool": {"role": "tool", "tool_call_id": call_id, "name": name, "content": output},
            "ok": result.ok,
        })
    return steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    from clover_cli.agent.instructions import system_prompt
    from clover_cli.tools import registry

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="clover-session-") as tmp:
        root = make_repo(Path(tmp))
        steps = record(root)
    doc = {
        "format": 1,
        "description": "A 20-step agent session on a copy of click (scripts/make_session_fixture.py); "
                       "each step is an assistant tool call and its real tool result.",
        "root": ROOT,
        "tools": registry.tool_schemas(),
        "messages": [{"role": "system", "content": system_prompt(Path(ROOT))},
                     {"role": "user", "content": TASK}],
        "steps": steps,
    }
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    failed = [k for k, s in enumerate(steps, 1) if not s["ok"]]
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes); steps whose tool failed: {failed or 'none'}")
    from clover_cli.engine.loader import load_model
    from clover_cli.bench.session import load_session, step_prompts

    lm = load_model("tiny")
    session = load_session(args.out)
    for k, ids in enumerate(step_prompts(lm, session), start=1):
        print(f"step {k:2d}: {len(ids):6,} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
