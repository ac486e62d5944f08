"""Shared options are declared once (clover_cli/commands/options.py) and work before or after the
command name; the approval modes and the default threshold are written once. In-process."""
from __future__ import annotations

import inspect
import json

import pytest
from click.testing import CliRunner

from clover_cli.cli import cli
from clover_cli.trust import TrustStore



def call(name: str, **arguments) -> str:
    """One Hermes-format tool call as a model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def make_repo(root, git: bool = False):
    root.mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


def replay(tmp, completions: list[str]) -> str:
    path = tmp / "script.json"
    path.write_text(json.dumps({"completions": completions}))
    return f"replay:{path}"


def _clover(*args):
    result = CliRunner().invoke(cli, list(args), prog_name="clover")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _tool_results(stdout: str) -> list[tuple[str, bool]]:
    lines = [json.loads(line) for line in stdout.splitlines()]
    return [(line["name"], line["ok"]) for line in lines if line["type"] == "tool_result"]


def test_run_takes_the_shared_options_before_or_after_the_command(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("run_shell", command="echo hi > hi.txt"), "Done."])
    after = _clover("run", "go", "--model", spec, "--root", str(repo), "--approval", "yolo", "--json")
    assert after.exit_code == 0, after.stderr
    assert _tool_results(after.stdout) == [("run_shell", True)] and (repo / "hi.txt").exists()
    (repo / "hi.txt").unlink()
    before = _clover("--model", spec, "--root", str(repo), "--approval", "yolo", "run", "go", "--json")
    assert before.exit_code == 0, before.stderr
    assert _tool_results(before.stdout) == [("run_shell", True)] and (repo / "hi.txt").exists()
    # the subcommand's value wins over the group's: read-only here, so the shell is refused
    (repo / "hi.txt").unlink()
    both = _clover("--model", "nonsense", "--approval", "yolo", "run", "go", "--model", spec,
                   "--root", str(repo), "--approval", "read-only", "--json")
    assert both.exit_code == 0, both.stderr
    assert _tool_results(both.stdout) == [("run_shell", False)] and not (repo / "hi.txt").exists()


def test_group_threshold_and_session_reach_run(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, ["Hello."])
    bad = _clover("--threshold", "2", "run", "go", "--model", spec, "--root", str(repo))
    assert bad.exit_code == 2 and "--threshold: threshold must be in (0, 1], got 2" in bad.stderr
    first = _clover("run", "go", "--model", spec, "--root", str(repo), "--json")
    session = json.loads(first.stdout.splitlines()[-1])["session_id"]
    resumed = _clover("--session", session, "--model", spec, "--root", str(repo), "run", "again", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1])["session_id"] == session
    missing = _clover("--session", "no-such-session", "run", "again", "--model", spec, "--root", str(repo))
    assert missing.exit_code == 2 and "no-such-session" in missing.stderr


def test_root_given_to_the_group_reaches_tool_undo_trust_and_fix(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    tool = _clover("--root", str(repo), "tool", "read_file", "--args", '{"path": "calc.py"}')
    assert tool.exit_code == 0 and json.loads(tool.stdout)["ok"], tool.output
    nowhere = _clover("--root", str(tmp_path / "nowhere"), "tool", "read_file")
    assert nowhere.exit_code == 2 and "is not a directory" in nowhere.stderr
    undo = _clover("--root", str(repo), "undo")
    assert undo.exit_code == 1 and "nothing to undo" in undo.output.lower(), undo.output
    assert _clover("--root", str(tmp_path / "nowhere"), "undo").exit_code == 2
    trust = _clover("--root", str(repo), "trust")
    assert trust.exit_code == 0 and TrustStore().decision(repo) is True
    fix = _clover("--root", str(tmp_path / "nowhere"), "--model", "tiny", "fix", "tests/x.py")
    assert fix.exit_code == 2 and "is not a directory" in fix.stderr


def test_approval_choices_come_from_the_one_list():
    from clover_cli.agent.config import APPROVAL_MODES, APPROVAL_ORDER, HEADLESS_APPROVAL_MODES
    from clover_cli.config import CloverConfig

    assert sorted(APPROVAL_MODES) == sorted(APPROVAL_ORDER) and APPROVAL_MODES[0] == CloverConfig().approval
    choices = {p.name: p for p in cli.params}
    assert tuple(choices["approval"].type.choices) == APPROVAL_MODES
    run = cli.get_command(None, "run")
    assert tuple(next(p for p in run.params if p.name == "approval").type.choices) == HEADLESS_APPROVAL_MODES
    assert "ask" not in HEADLESS_APPROVAL_MODES
    bad = _clover("run", "x", "--approval", "ask")
    assert bad.exit_code == 2


def test_the_default_threshold_is_written_once_and_checked_alike():
    from clover_cli.agent.backends.base import BackendError
    from clover_cli.agent.backends.engine_backend import EngineBackend
    from clover_cli.agent.backends.replay import ReplayBackend
    from clover_cli.config import CloverConfig, ConfigError
    from clover_cli.engine.config import DEFAULT_THRESHOLD, GenerationConfig

    for default in (GenerationConfig().threshold, CloverConfig().threshold,
                    inspect.signature(ReplayBackend).parameters["threshold"].default):
        assert default == DEFAULT_THRESHOLD
    # the in-process engine takes None as "none set": the family's own, else the default
    assert inspect.signature(EngineBackend).parameters["threshold"].default is None
    assert EngineBackend("tiny").threshold == DEFAULT_THRESHOLD
    for bad in (0, 0.0, -0.1, 1.01):  # (0, 1] everywhere
        with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\]"):
            GenerationConfig(threshold=bad)
        with pytest.raises(ConfigError, match=r"threshold must be in \(0, 1\]"):
            CloverConfig(threshold=bad)
    assert GenerationConfig(threshold=1).threshold == 1.0
    with pytest.raises(BackendError, match=r"threshold must be in \(0, 1\]"):
        from clover_cli.agent.backends.base import ModelBackend

        class _Bare(ModelBackend):
            def stream(self, *a, **k):
                yield from ()

        _Bare(threshold=0)


# flag -> (CommandLine field, a value given to the group, another given to the command)
SHARED = {"--model": ("model", "group-model", "command-model"), "--root": ("root", "/group", "/command"),
          "--approval": ("approval", "read-only", "yolo"), "--threshold": ("threshold", 0.5, 0.7),
          "--cache-mb": ("cache_mb", 1.0, 2.0), "--diffusion-mode": ("diffusion_mode", "exact", "dual"),
          "--device": ("device", "cpu", "cuda"), "--dtype": ("dtype", "float32", "bfloat16"),
          "--quantize": ("quantize", "int8", "int4"), "--continue": ("continue_", False, True),
          "--session": ("session_id", "group-session", "command-session")}


def _shared_args(command, side: int) -> list[str]:
    """The command's shared options with the group's (side 1) or the command's (side 2) values."""
    import click

    args = []
    for param in command.params:
        if isinstance(param, click.Option) and param.opts[0] in SHARED:
            value = SHARED[param.opts[0]][side]
            args += ([param.opts[0]] if value else []) if param.is_flag else [param.opts[0], str(value)]
    return args


@pytest.mark.parametrize("name", ["chat", "run", "fix", "trust", "undo", "tool"])
def test_a_shared_option_reaches_the_command_only_through_the_command_line(name):
    """Each shared option given to the group and again to the command ends in the one CommandLine
    (clover_cli/commands/options.py) with the command's value where the command takes it, the
    group's otherwise; neither context keeps it in its params, so there is nothing to read back
    from the parent."""
    import click

    from clover_cli.commands.options import command_line

    assert {p.opts[0] for p in cli.params if isinstance(p, click.Option)} - {"--version", "-h"} <= set(SHARED)
    command = cli.get_command(None, name)
    group = cli.make_context("clover", [*_shared_args(cli, 1), name])
    required = ["x" for p in command.params if isinstance(p, click.Argument) and p.required]
    ctx = command.make_context(name, [*required, *_shared_args(command, 2)], parent=group)
    assert group.params == {}
    flags = {p.opts[0] for p in command.params if isinstance(p, click.Option)}
    assert not {p.name for p in command.params if p.opts[0] in SHARED} & set(ctx.params)
    given = command_line(ctx)
    for flag in {p.opts[0] for p in cli.params if isinstance(p, click.Option)} & set(SHARED):
        field, at_group, at_command = SHARED[flag]
        assert getattr(given, field) == (at_command if flag in flags else at_group), flag


def test_cache_mb_reaches_the_engine(tmp_path, monkeypatch):
    """--cache-mb (or the user's cache_mb) is the engine's prefix-cache budget; 0 turns reuse off."""
    from clover_cli.agent.backends import make_backend

    assert make_backend("tiny", cache_mb=0).engine.prefix_cache.budget == 0
    assert make_backend("tiny", cache_mb=3).engine.prefix_cache.budget == 3 << 20
    seen = []
    from clover_cli.agent import backends

    real = backends.make_backend

    def spy(spec, **opts):
        seen.append(opts.get("cache_mb"))
        return real(spec, **opts)

    monkeypatch.setattr(backends, "make_backend", spy)
    repo = make_repo(tmp_path / "r")
    script = replay(tmp_path, ["done"])
    for args, want in ((["--cache-mb", "5"], 5.0), ([], None)):
        result = _clover("run", "hi", "--model", script, "--root", str(repo), *args)
        assert result.exit_code == 0, result.output
        assert seen[-1] == want
    assert _clover("run", "hi", "--model", script, "--cache-mb", "-1").exit_code == 2


def test_max_steps_has_one_default_and_one_help_text():
    """`clover run`, `fix` and `swebench` show clover_cli/agent/config.py's default, as AgentConfig
    uses it, with one help text; 0 is refused by click before any work."""
    from pathlib import Path

    from clover_cli.agent.config import DEFAULT_MAX_STEPS, AgentConfig

    import click

    ctx = click.Context(cli)
    options = [next(p for p in cli.get_command(ctx, name).params if p.name == "max_steps")
               for name in ("run", "fix", "swebench")]
    assert {o.default for o in options} == {DEFAULT_MAX_STEPS} == {AgentConfig(root=Path(".")).max_steps}
    assert len({o.help for o in options}) == 1
    for name in ("run", "fix", "swebench"):
        res = CliRunner().invoke(cli, [name, "--max-steps", "0", "x"])
        assert res.exit_code == 2 and "--max-steps" in res.output, res.output
