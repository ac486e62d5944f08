"""What a sandboxed command cannot reach: the API key under any variable name, files in $HOME the
hidden list never named, and the real git dir a `.git` file points to. `clover fix`'s test command
runs under the same rules. Real bubblewrap, real processes."""
from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from clover_cli.modes.fix.run import FixOptions, run_test
from clover_cli.tools import sandbox, sandbox_env
from clover_cli.tools.shell import run_shell

from .conftest import git

needs_bwrap = pytest.mark.skipif(not sandbox.status().available,
                                 reason=f"no bubblewrap sandbox here: {sandbox.status().reason}")
KEY = "sk-test-4f8a1c9e2b7d"


@pytest.fixture(autouse=True)
def _fresh(fresh_sandbox, monkeypatch):
    monkeypatch.setattr(sandbox_env, "_key_envs", {sandbox_env.DEFAULT_KEY_ENV})


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME outside the repository with secrets no list names, and toolchains a build needs."""
    home = tmp_path / "home"
    for rel, text in ((".pgpass", "db:*:*:u:PGPASS-SECRET\n"), (".cargo/credentials.toml", "token = 'CARGO-SECRET'\n"),
                      (".cache/huggingface/token", "HF-SECRET\n"), (".myapp/secret.json", "MYAPP-SECRET\n"),
                      (".local/lib/site.txt", "LOCAL-LIB-VISIBLE\n")):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    tool = home / ".cargo" / "bin" / "mytool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho TOOL-RUNS\n")
    tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{tool.parent}:" + __import__("os").environ["PATH"])
    return home


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_the_api_key_is_dropped_whatever_the_variable_is_called(git_repo, monkeypatch, profile):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("LLM_BEARER", KEY)
    monkeypatch.setenv("MY_OPENAI", f"Bearer {KEY}")
    monkeypatch.setenv("ZEBRA", "zz-registered-9137")  # a name no pattern knows, named by --api-key-env
    monkeypatch.setenv("COPY_OF_IT", "x=zz-registered-9137")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("PIP_KEYRING_PROVIDER", "disabled")  # secret-named, but its value is no secret
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "http.extraHeader")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", f"Authorization: Bearer {KEY}")
    sandbox_env.register_secret_env("ZEBRA")
    res = run_shell(git_repo, "env", sandbox_profile=profile)
    assert res.details["sandbox"] == f"bwrap:{profile}"
    for value in (KEY, "zz-registered-9137", "LLM_BEARER", "MY_OPENAI", "ZEBRA", "COPY_OF_IT"):
        assert value not in res.output, value
    assert "LANG=C.UTF-8" in res.output and "PYTHONHASHSEED=7" in res.output  # the allow list
    assert "GIT_CONFIG_KEY_0=http.extraHeader" in res.output  # kept, its value emptied


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_home_is_hidden_except_toolchains(git_repo, home, profile):
    res = run_shell(git_repo, "cat ~/.pgpass ~/.cargo/credentials.toml ~/.cache/huggingface/token "
                              "~/.myapp/secret.json ~/.local/lib/site.txt; mytool; ls -A ~", sandbox_profile=profile)
    for secret in ("PGPASS-SECRET", "CARGO-SECRET", "HF-SECRET", "MYAPP-SECRET"):
        assert secret not in res.output, res.output
    assert "LOCAL-LIB-VISIBLE" in res.output and "TOOL-RUNS" in res.output, res.output
    assert (home / ".pgpass").read_text() == "db:*:*:u:PGPASS-SECRET\n"


@needs_bwrap
def test_a_gitdir_file_pointing_inside_the_repository_keeps_that_git_dir_read_only(git_repo):
    real = git_repo / "sub" / "dir"
    real.parent.mkdir()
    (git_repo / ".git").rename(real)
    (git_repo / ".git").write_text("gitdir: sub/dir\n")
    assert git(git_repo, "rev-parse", "--git-dir").strip().endswith("sub/dir")
    config = (real / "config").read_text()
    res = run_shell(git_repo, "echo '#!/bin/sh' > sub/dir/hooks/post-commit; echo x >> sub/dir/config; "
                              "mkdir -p sub/dir/refs/heads/evil; echo ok > new.txt", sandbox_profile="workspace")
    assert res.details["sandbox"] == "bwrap:workspace"
    assert (git_repo / "new.txt").read_text() == "ok\n"  # the repository itself stays writable
    assert not (real / "hooks" / "post-commit").exists() and (real / "config").read_text() == config
    assert not (real / "refs" / "heads" / "evil").exists()
    assert sandbox.git_dirs(git_repo) == [str(git_repo / ".git"), str(real)]


def test_fix_runs_the_test_command_without_secrets_and_sandboxed(git_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("LLM_BEARER", KEY)
    outside = tmp_path / "outside.txt"
    code = ("import os, sys; print('KEYS', os.environ.get('OPENAI_API_KEY'), os.environ.get('LLM_BEARER'));"
            f"open({str(outside)!r}, 'w').write('x')")
    run = run_test(FixOptions(test="t", root=git_repo), [sys.executable, "-c", code])
    assert "KEYS None None" in run.output, run.output
    assert KEY not in run.output
    if sandbox.status().available:
        assert not outside.exists()  # written, if at all, to the sandbox's private /tmp
    assert Path(git_repo / "README.md").read_text() == "# demo\n"


ENCODINGS = {"B64_OF_IT": base64.b64encode(KEY.encode()).decode(), "HEX_OF_IT": KEY.encode().hex(),
             "UPPER_OF_IT": KEY.upper(), "REVERSED_OF_IT": KEY[::-1],
             "FIRST_HALF": KEY[:10], "SECOND_HALF": KEY[10:], "PLAIN_SETTING": "visible-value"}


@needs_bwrap
@pytest.mark.parametrize("profile", ["read-only", "workspace"])
def test_only_allow_listed_variables_reach_a_sandboxed_command(git_repo, monkeypatch, profile):
    """The key base64- or hex-encoded, upper-cased, reversed or split in two reaches no command:
    no variable outside the allow list does (the user's `[shell] env` adds names)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name, value in ENCODINGS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    res = run_shell(git_repo, "env", sandbox_profile=profile)
    assert res.details["sandbox"] == f"bwrap:{profile}"
    for name, value in ENCODINGS.items():
        assert name not in res.output and value not in res.output, name
    assert "LANG=C.UTF-8" in res.output and "PATH=" in res.output and "HOME=" in res.output


@needs_bwrap
def test_the_user_config_adds_names_and_a_repository_cannot(git_repo, tmp_path, monkeypatch):
    conf = tmp_path / "xdg"
    (conf / "clover").mkdir(parents=True)
    (conf / "clover" / "config.toml").write_text('[shell]\nenv = ["PLAIN_SETTING"]\n')
    (git_repo / ".clover").mkdir()
    (git_repo / ".clover" / "config.toml").write_text('[shell]\nenv = ["HEX_OF_IT"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(conf))
    for name, value in ENCODINGS.items():
        monkeypatch.setenv(name, value)
    res = run_shell(git_repo, "env", sandbox_profile="workspace")
    assert "PLAIN_SETTING=visible-value" in res.output
    assert "HEX_OF_IT" not in res.output
