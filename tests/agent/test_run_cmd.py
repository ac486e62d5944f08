"""`clover run` with the replay backend: in-process through click's CliRunner (the command's
logic, exit codes and output), and as a real process where a real signal is needed (Ctrl+C)."""
import json
import subprocess
import sys
import time
import traceback
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from clover_cli.cli import cli
from clover_cli.trust import TrustStore

from .helpers import CALC, call, make_repo, replay

PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"


def clover(*args):
    """`clover ARGS` in-process: returncode, stdout, stderr like a finished process (an escaping
    exception shows up in stderr as a traceback, as it would in a real process)."""
    result = CliRunner().invoke(cli, list(args), prog_name="clover")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(traceback.format_exception(result.exception))
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=stderr)


def test_run_json_lines(tmp_path):
    repo = make_repo(tmp_path / "repo")
    spec = replay(tmp_path, ["Reading.\n" + call("read_file", path="calc.py"),
                             call("apply_patch", patch=PATCH),
                             call("run_shell", command="python3 check_calc.py"),
                             call("run_shell", command="rm check_calc.py"),
                             "Fixed add."])
    t0 = time.monotonic()
    p = clover("run", "fix add", "--model", spec, "--root", str(repo), "--json",
               "--shell-allow", "python3 check_calc.py")
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    types = [l["type"] for l in lines]
    assert set(types) <= {"block", "tool_call", "tool_result", "approval", "turn_end", "error"}
    assert types[-1] == "turn_end" and types.count("tool_call") == 4
    calls = [l for l in lines if l["type"] == "tool_call"]
    assert calls[0]["name"] == "read_file" and calls[0]["arguments"] == {"path": "calc.py"}
    results = [l for l in lines if l["type"] == "tool_result"]
    assert [(r["name"], r["ok"]) for r in results] == [("read_file", True), ("apply_patch", True),
                                                      ("run_shell", True), ("run_shell", False)]
    assert "PASSED" in results[2]["output"]
    approval = [l for l in lines if l["type"] == "approval"]
    assert len(approval) == 1 and approval[0]["decision"] == "no" and "rm check_calc.py" in approval[0]["summary"]
    assert "not allowed here" in results[3]["output"] and (repo / "check_calc.py").exists()
    end = lines[-1]
    assert end["reason"] == "done" and end["final_text"] == "Fixed add."
    assert end["stats"]["steps"] == 5 and end["stats"]["tool_calls"] == 4
    assert end["changed_files"] == ["calc.py"]
    assert "".join(l["text"] for l in lines if l["type"] == "block").startswith("Reading.")
    assert (repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert elapsed < 60


def test_run_text_mode_and_limits(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, ["Look: " + call("read_file", path="calc.py"), call("grep", pattern="mul"), "never"])
    p = clover("run", "look", "--model", spec, "--root", str(repo), "--max-steps", "2")
    assert p.returncode == 1
    assert p.stdout.startswith("Look: ") and "<tool_call>" not in p.stdout  # markup shown as one line
    assert '> read_file {"path": "calc.py"} -> ok' in p.stdout and "> grep " in p.stdout
    assert "max_steps" in p.stderr


def test_run_text_summary_line_counts_in_words(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("read_file", path="calc.py"), "It adds."])
    p = clover("run", "look", "--model", spec, "--root", str(repo))
    assert p.returncode == 0, p.stderr
    assert "[done: 2 steps, 1 tool call, " in p.stderr


def test_run_yolo_runs_shell(tmp_path):
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("run_shell", command="echo made > made.txt"), "ok"])
    p = clover("run", "make it", "--model", spec, "--root", str(repo), "--approval", "yolo", "--json")
    assert p.returncode == 0, p.stderr
    assert (repo / "made.txt").read_text().strip() == "made"


def test_run_bad_arguments_exit_2(tmp_path):
    p = clover("run", "x", "--model", "nonsense-model", "--root", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "unknown model spec" in p.stderr
    p = clover("run", "x", "--model", f"replay:{tmp_path / 'missing.json'}", "--root", str(tmp_path))
    assert p.returncode == 2 and "not found" in p.stderr
    p = clover("run", "x", "--model", "tiny", "--root", str(tmp_path / "nope"))
    assert p.returncode == 2 and "not a directory" in p.stderr
    p = clover("run", "x", "--approval", "ask", "--root", str(tmp_path))
    assert p.returncode == 2


class _Run:
    """`clover run` as a background process whose stdout lines a thread collects (no select on a
    buffered pipe: lines read ahead would stay hidden until more output came)."""

    def __init__(self, args):
        import os
        import queue
        import threading
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.p = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        self.err: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self._err_pump = threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True)
        self._err_pump.start()

    def _pump(self):
        for raw in self.p.stdout:
            self.lines.put(json.loads(raw))
        self.lines.put(None)

    def until(self, kind, deadline=60):
        """Waits for a line of type `kind`."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            if line is None:
                break
            self.seen.append(line)
            if line["type"] == kind:
                return
        raise AssertionError(f"no {kind} line: {self.seen}")

    def until_err(self, text, deadline=60):
        """Waits until stderr has shown `text` (a hang guard of `deadline` s)."""
        end = time.monotonic() + deadline
        while text not in "".join(self.err) and time.monotonic() < end:
            time.sleep(0.02)
        assert text in "".join(self.err), self.err

    def finish(self, timeout):
        """Waits for the exit; returns (exit status, every stdout line, stderr)."""
        try:
            self.p.wait(timeout=timeout)
        finally:
            self.p.kill()
        self._err_pump.join(30)
        err = "".join(self.err)
        while (line := self.lines.get(timeout=30)) is not None:
            self.seen.append(line)
        return self.p.returncode, self.seen, err


@pytest.mark.slow
def test_run_ctrl_c_stops_a_running_command(tmp_path):
    import signal
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("run_shell", command="touch started; sleep 300; touch late.txt"), "never"])
    run = _Run(["run", "wait", "--model", spec, "--root", str(repo), "--approval", "yolo", "--json"])
    run.until("tool_call")
    end = time.monotonic() + 60
    while not (repo / "started").exists() and time.monotonic() < end:  # the command is running
        time.sleep(0.02)
    t0 = time.monotonic()
    run.p.send_signal(signal.SIGINT)
    code, lines, err = run.finish(timeout=120)
    took = time.monotonic() - t0
    assert code == 1 and took < 100, (code, took, err, lines[-2:])  # a hang guard: uncancelled, 300 s
    assert lines[-1]["type"] == "turn_end" and lines[-1]["reason"] == "cancelled"
    result = [l for l in lines if l["type"] == "tool_result"][0]
    assert not result["ok"] and "cancelled" in result["output"]
    assert "Ctrl+C again" in err
    time.sleep(0.3)
    assert not (repo / "late.txt").exists()


@pytest.mark.slow
def test_run_second_ctrl_c_exits_130(tmp_path):
    import signal
    repo = make_repo(tmp_path / "repo", git=False)
    path = tmp_path / "slow.json"  # each chunk takes 300 s: a model step that cannot be interrupted
    path.write_text(json.dumps({"completions": ["slow answer"], "delay": 300, "chunk_chars": 4}))
    run = _Run(["run", "wait", "--model", f"replay:{path}", "--root", str(repo), "--json"])
    run.until("block")
    run.p.send_signal(signal.SIGINT)
    run.until_err("cancelling")  # the first Ctrl+C was handled: the second is a second one
    t0 = time.monotonic()
    run.p.send_signal(signal.SIGINT)
    code, lines, err = run.finish(timeout=120)
    assert code == 130 and time.monotonic() - t0 < 100, (code, err)  # a hang guard: the step takes 300 s
    assert "cancelling" in err and "interrupted" in err


def test_run_and_fix_take_defaults_from_the_project_config(tmp_path, monkeypatch):
    """A trusted repository's `.clover/config.toml` sets the model (and for run a lower approval)
    when the command line does not; a `test_cmd` there no longer makes the config unreadable; a bad file is exit 2."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the toy project's pytest needs no plugins
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("write_file", path="new.txt", content="x"), "Wrote it."])
    conf = repo / ".clover" / "config.toml"
    conf.parent.mkdir(exist_ok=True)
    conf.write_text(f'model = "{spec}"\napproval = "read-only"\ntest_cmd = "python -m pytest {{test}}"\n')
    TrustStore().set(repo, True)  # a repository's own settings count only once it is trusted
    p = clover("run", "write it", "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    results = [json.loads(l) for l in p.stdout.splitlines() if json.loads(l)["type"] == "tool_result"]
    assert results and not results[0]["ok"] and not (repo / "new.txt").exists()  # read-only
    # the command line wins
    p = clover("run", "write it", "--root", str(repo), "--json", "--approval", "auto-edit")
    assert p.returncode == 0, p.stderr
    assert (repo / "new.txt").read_text() == "x"
    # group options are the command line too: `clover --approval ask run` is auto-edit, not the
    # file's mode (here yolo would run the shell command)
    (repo / "new.txt").unlink()
    conf.write_text(f'model = "{spec}"\napproval = "yolo"\n')
    p = clover("--approval", "ask", "run", "write it", "--root", str(repo), "--json")
    assert p.returncode == 0 and (repo / "new.txt").exists()
    spec2 = replay(tmp_path, [call("run_shell", command="echo ran > ran.txt"), "Ran."], name="s2.json")
    conf.write_text(f'model = "{spec}"\napproval = "yolo"\n')
    p = clover("--approval", "ask", "--model", spec2, "run", "run it", "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    assert not (repo / "ran.txt").exists()  # auto-edit: the shell command needed a yes
    conf.write_text('threshold = 2\n')
    p = clover("run", "write it", "--root", str(repo))
    assert p.returncode == 2 and "threshold must be in (0, 1]" in p.stderr
    # with every default given on the command line the file is not needed
    p = clover("run", "write it", "--root", str(repo), "--model", spec, "--approval", "read-only",
               "--threshold", "0.9")
    assert p.returncode == 0, p.stderr
    # clover fix: the config's model is the one it loads once the test has failed
    (repo / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n"
                                       "    assert add(2, 3) == 5\n")
    conf.write_text('model = "replay:/no/such/script.json"\n')
    p = clover("fix", "test_calc.py::test_add", "--root", str(repo))
    assert p.returncode == 2 and "/no/such/script.json" in p.stderr


def test_fix_takes_test_cmd_from_the_user_config(tmp_path, monkeypatch):
    """`test_cmd` in ~/.config/clover/config.toml is used when the project sets none (before, it
    was accepted and ignored); a trusted repository's file wins over it."""
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / "test_calc.py").write_text("def test_add():\n    pass\n")
    xdg = tmp_path / "xdg"
    (xdg / "clover").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the toy project's pytest needs no plugins
    (xdg / "clover" / "config.toml").write_text(
        'test_cmd = "python3 -c \'import sys; sys.exit(0)\' {test}"\n')
    p = clover("fix", "test_calc.py::test_add", "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["command"][:2] == ["python3", "-c"]
    (repo / ".clover").mkdir()
    (repo / ".clover" / "config.toml").write_text('test_cmd = "python3 -m pytest -q {test}"\n')
    p = clover("fix", "test_calc.py::test_add", "--root", str(repo), "--json")
    assert json.loads(p.stdout)["command"][:2] == ["python3", "-c"]  # untrusted: ignored
    assert "not trusted" in p.stderr and "clover trust" in p.stderr
    TrustStore().set(repo, True)
    p = clover("fix", "test_calc.py::test_add", "--root", str(repo), "--json")
    assert json.loads(p.stdout)["command"][:3] == ["python3", "-m", "pytest"], p.stderr


def test_text_mode_prints_a_truncated_answer_and_an_error_once(tmp_path):
    """issue 49 (4): the answer is on stdout once, not again on stderr after `stopped:`; an error
    line is not repeated as `stopped: error: X`."""
    from .openai_server import ScriptedServer

    repo = make_repo(tmp_path / "repo", git=False)
    cut = [{"choices": [{"index": 0, "delta": {"content": "The answer is a long one"}, "finish_reason": "length"}]}]
    refused = {"status": 400, "body": {"error": {"message": "a refusal only this server words"}}}
    with ScriptedServer([cut, refused]) as srv:
        truncated = clover("run", "hi", "--root", str(repo), "--model", f"openai:{srv.base_url}#m")
        failed = clover("run", "hi", "--root", str(repo), "--model", f"openai:{srv.base_url}#m")
    assert truncated.stdout.count("The answer is a long one") == 1
    assert "The answer is" not in truncated.stderr and "stopped: truncated\n" in truncated.stderr
    assert failed.stderr.count("a refusal only this server words") == 1, failed.stderr
    assert "stopped: error\n" in failed.stderr
