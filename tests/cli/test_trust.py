"""Trust (clover_cli/trust.py, `clover trust`) and the one settings loader (clover_cli/config.py):
a repository's own .clover/config.toml counts only when the user trusts it, and even then it can
neither raise the approval mode nor send prompts to a server (docs/security.md)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from clover_cli.config import ConfigError, load_settings
from clover_cli.trust import TrustStore, trust_path


def clover(*args, cwd=None, input=None):
    """`clover ARGS` in-process (click's CliRunner) in folder `cwd`: returncode, stdout, stderr
    like a finished process; an escaping exception is raised."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    from clover_cli.cli import cli

    before = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(cli, list(args), input=input, prog_name="clover")
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def user_file(text: str) -> Path:
    return write(Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml", text)


# -- the trust list --------------------------------------------------------------------------


def test_trust_list_keys_by_real_path_and_writes_atomically(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    link = tmp_path / "link"
    link.symlink_to(repo)
    store = TrustStore()
    assert store.path == trust_path() and str(store.path).startswith(os.environ["XDG_CONFIG_HOME"])
    assert store.decision(repo) is None
    assert store.set(link, True) == str(repo.resolve())
    assert store.decision(repo) is True and TrustStore().is_trusted(link)
    store.set(repo, False)
    assert store.decision(link) is False
    assert [(e.path, e.trusted) for e in store.entries()] == [(str(repo.resolve()), False)]
    assert store.forget(repo) and store.decision(repo) is None and not store.forget(repo)
    data = json.loads(store.path.read_text())
    assert data == {"version": 1, "repos": {}}
    assert [p.name for p in store.path.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'{"repos": []}', b"[1]",
                                     b"[" * 100000])
def test_corrupt_trust_list_is_a_warning_never_a_traceback(tmp_path, content):
    repo = tmp_path / "repo"
    repo.mkdir()
    path = trust_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    store = TrustStore()
    assert store.decision(repo) is None
    assert "corrupt" in store.warning and "untrusted" in store.warning
    # the next decision rewrites the list and keeps the old bytes beside it
    store.set(repo, True)
    assert TrustStore().decision(repo) is True
    kept = [p for p in path.parent.iterdir() if p.name.startswith("trusted.json.corrupt-")]
    assert len(kept) == 1 and kept[0].read_bytes() == content


def test_trust_command(tmp_path):
    repo = tmp_path / "repo"
    write(repo / ".clover" / "config.toml", 'approval = "read-only"\n')
    p = clover("trust", str(repo))
    assert p.returncode == 0, p.stderr
    assert f"Trusted: {repo.resolve()}" in p.stdout and "never raise" in p.stdout
    assert TrustStore().decision(repo) is True
    p = clover("trust", "--list")
    assert p.returncode == 0 and "trusted" in p.stdout and str(repo.resolve()) in p.stdout
    p = clover("trust", "--revoke", cwd=repo)  # PATH defaults to the current directory
    assert p.returncode == 0 and "Not trusted" in p.stdout
    assert TrustStore().decision(repo) is False
    p = clover("--root", str(repo), "trust", "--forget")  # the group's --root counts too
    assert p.returncode == 0 and "Forgot" in p.stdout and TrustStore().decision(repo) is None
    p = clover("trust", str(tmp_path / "missing"))
    assert p.returncode == 2 and "is not a directory" in p.stderr and "Traceback" not in p.stderr
    p = clover("trust", "--revoke", "--list")
    assert p.returncode == 2 and "only one of" in p.stderr
    trust_path().write_text("{broken")
    p = clover("trust", "--list")
    assert p.returncode == 0 and "corrupt" in p.stderr and "Traceback" not in p.stderr


# -- the settings loader ---------------------------------------------------------------------


def test_untrusted_repository_settings_are_not_read(tmp_path):
    repo = tmp_path / "repo"
    write(repo / ".clover" / "config.toml", 'approval = "read-only"\nthreshold = 0.5\n')
    s = load_settings(repo)
    assert s.config.approval == "ask" and s.config.threshold == 0.95
    assert s.repo_file == repo / ".clover" / "config.toml" and s.repo_trusted is None
    assert len(s.warnings) == 1 and "not trusted" in s.warnings[0] and "clover trust" in s.warnings[0]
    # not even opened: a broken file in an untrusted repository is no error
    write(repo / ".clover" / "config.toml", "threshold = = 1")
    assert load_settings(repo).config.threshold == 0.95
    # a "no" is remembered and quiet
    TrustStore().set(repo, False)
    s = load_settings(repo)
    assert s.config.threshold == 0.95 and s.warnings == () and s.repo_trusted is False
    # trusted: read, and a broken file names itself
    TrustStore().set(repo, True)
    with pytest.raises(ConfigError, match=r"repo/\.clover/config\.toml: not valid TOML"):
        load_settings(repo)
    write(repo / ".clover" / "config.toml", 'approval = "read-only"\nthreshold = 0.5\n')
    s = load_settings(repo)
    assert (s.config.approval, s.config.threshold, s.warnings) == ("read-only", 0.5, ())
    assert s.sources["approval"] == "repository" and s.sources["model"] == "default"


def test_trusted_repository_may_lower_approval_but_never_raise_it(tmp_path):
    repo = tmp_path / "repo"
    conf = write(repo / ".clover" / "config.toml", 'approval = "yolo"\n')
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert s.config.approval == "ask"
    assert "may lower the approval mode but never raise it" in s.warnings[0]
    user_file('approval = "read-only"\n')
    conf.write_text('approval = "auto-edit"\n')
    assert load_settings(repo).config.approval == "read-only"
    user_file('approval = "yolo"\n')
    for mode in ("read-only", "ask", "auto-edit", "yolo"):
        conf.write_text(f'approval = "{mode}"\n')
        s = load_settings(repo)
        assert s.config.approval == mode and s.warnings == ()
    user_file('approval = "auto-edit"\n')
    conf.write_text('approval = "yolo"\n')
    assert load_settings(repo).config.approval == "auto-edit"
    assert load_settings(repo, {"approval": "yolo"}).config.approval == "yolo"  # the user's flag


def test_trusted_repository_may_not_pick_a_remote_model(tmp_path):
    repo = tmp_path / "repo"
    remote = "openai:http://203.0.113.9/v1#m"
    conf = write(repo / ".clover" / "config.toml", f'model = "{remote}"\n')
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert s.config.model == "tiny" and "may not send your prompts and API key" in s.warnings[0]
    user_file(f'model = "{remote}"\n')  # the user names the same server: fine
    assert load_settings(repo).config.model == remote and load_settings(repo).warnings == ()
    user_file('model = "tiny"\n')
    conf.write_text('model = "replay:/x/script.json"\n')  # a local model is the repository's choice
    assert load_settings(repo).config.model == "replay:/x/script.json"


def test_one_range_check_names_the_source(tmp_path):
    with pytest.raises(ConfigError, match=r"--threshold: threshold must be in \(0, 1\]"):
        load_settings(tmp_path, {"threshold": 0.0})
    with pytest.raises(ConfigError, match="--approval: approval must be one of"):
        load_settings(tmp_path, {"approval": "sometimes"})
    path = user_file("threshold = 1.5\n")
    with pytest.raises(ConfigError, match=rf"{path}: threshold must be in \(0, 1\]"):
        load_settings(tmp_path)
    # every needed value given as a flag: no file is read
    s = load_settings(tmp_path, {"model": "tiny", "approval": "ask", "threshold": 0.5},
                      needed=("model", "approval", "threshold"))
    assert s.config.threshold == 0.5 and set(s.sources.values()) == {"flag", "default"}
    user_file("x" * 300_000)
    with pytest.raises(ConfigError, match="larger than 256 KB"):
        load_settings(tmp_path)


def test_repository_config_that_leads_outside_or_is_not_a_file(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".clover").mkdir(parents=True)
    outside = write(tmp_path / "elsewhere.toml", 'approval = "read-only"\n')
    (repo / ".clover" / "config.toml").symlink_to(outside)
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert s.config.approval == "ask" and "leads outside the repository" in s.warnings[0]
    (repo / ".clover" / "config.toml").unlink()
    os.mkfifo(repo / ".clover" / "config.toml")  # would block a plain read forever
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(repo)


# -- the TUI's one-time question -------------------------------------------------------------


class _Tty:
    def isatty(self):
        return True


def test_tui_asks_once_in_a_terminal_and_remembers(tmp_path):
    import pty
    import select
    import signal
    import time

    repo = tmp_path / "repo"
    write(repo / ".clover" / "config.toml", 'approval = "read-only"\n')
    pid, fd = pty.fork()
    if pid == 0:  # the child: `clover chat` on a terminal
        os.execv(sys.executable, [sys.executable, "-m", "clover_cli.cli", "chat", "--root", str(repo),
                                  "--model", "replay:/nonexistent/script.json"])
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"[y/N]" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                seen += os.read(fd, 4096)
        assert b"Trust this repository's settings? [y/N]" in seen, seen
        assert str(repo / ".clover" / "config.toml").encode() in seen.replace(b"\r\n", b"")
        os.write(fd, b"y\r")
        while TrustStore().decision(repo) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert TrustStore().decision(repo) is True
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def test_trust_question_is_never_asked_without_a_terminal_or_twice(tmp_path):
    from clover_cli.commands.chat_cmd import ask_trust

    repo = tmp_path / "repo"
    repo.mkdir()
    assert ask_trust(repo, _Tty(), _Tty()) is None  # ships no settings: nothing to ask
    write(repo / ".clover" / "config.toml", 'approval = "read-only"\n')
    assert ask_trust(repo) is None  # pytest's stdin is no terminal: no question, no decision stored
    assert TrustStore().decision(repo) is None
    TrustStore().set(repo, False)
    assert ask_trust(repo, _Tty(), _Tty()) is False  # already answered: not asked again


def test_flags_are_range_checked_by_the_loader_in_every_command(tmp_path):
    p = clover("run", "x", "--root", str(tmp_path), "--model", "tiny", "--threshold", "0")
    assert p.returncode == 2 and "--threshold: threshold must be in (0, 1]" in p.stderr
    assert "Traceback" not in p.stderr
    user_file("threshold = 7\n")
    p = clover("fix", "t.py", "--root", str(tmp_path))
    assert p.returncode == 2 and "config.toml: threshold must be in (0, 1], got 7" in p.stderr


def test_cache_mb_comes_from_the_user_or_a_flag_never_a_repository(tmp_path):
    """cache_mb (the prefix cache's memory, docs/engine.md) is the user's: a trusted repository's
    file may not set it; a bad value names its source."""
    repo = tmp_path / "repo"
    conf = write(repo / ".clover" / "config.toml", "cache_mb = 100000\n")
    TrustStore().set(repo, True)
    s = load_settings(repo)
    assert s.config.cache_mb is None and "may not choose Clover's memory use" in s.warnings[0]
    user_file("cache_mb = 64\n")
    assert load_settings(repo).config.cache_mb == 64
    assert load_settings(repo, {"cache_mb": 0}).config.cache_mb == 0
    conf.write_text("")
    for bad in ("-1", '"lots"', "true", "inf"):
        user_file(f"cache_mb = {bad}\n")
        with pytest.raises(ConfigError, match=r"config\.toml: cache_mb must be a number of MiB >= 0"):
            load_settings(repo)
    user_file("")
    with pytest.raises(ConfigError, match=r"--cache-mb: cache_mb must be"):
        load_settings(repo, {"cache_mb": -2})
