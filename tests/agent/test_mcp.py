"""MCP client: a real MCP server written with the `mcp` SDK (tests/agent/mcp_server.py, stdio),
declared in the user config, whose tools a scripted model calls through `clover run`, with the
approval mode honoured; config errors; a repository cannot add servers."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clover_cli.agent.mcp import McpConfigError, load_servers
from clover_cli.agent.mcp.config import servers_from

from .helpers import call, clover_in_process, make_repo, replay

SERVER = Path(__file__).with_name("mcp_server.py")


def clover(*args, cwd=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "clover_cli.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=os.environ.copy())


def _configure(notes: Path, extra: str = "") -> Path:
    """The user's config: the notes server, with lookup_word and broken_tool listed read-only."""
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[mcp.servers.notes]\ncommand = {json.dumps(sys.executable)}\n'
                    f'args = [{json.dumps(str(SERVER))}, {json.dumps(str(notes))}]\ntimeout = 90\n'
                    f'read_only_tools = ["lookup_word", "broken_tool"]\n{extra}')
    return path


def test_config_entries_are_checked():
    ok = servers_from({"mcp": {"servers": {"a": {"command": "srv", "args": ["-x"], "env": {"K": "v"}},
                                           "b": {"url": "http://127.0.0.1:9/mcp"}}}})
    assert ok["a"].transport == "stdio" and ok["a"].args == ("-x",) and ok["b"].transport == "http"
    bad = [{"a": {}}, {"a": {"command": "x", "url": "http://h"}}, {"a": {"command": "x", "args": "y"}},
           {"a": {"url": "ftp://h"}}, {"a b": {"command": "x"}}, {"a": {"command": "x", "colour": 1}},
           {"a": {"command": "x", "timeout": -1}}, {"a": {"command": "x", "read_only_tools": "t"}}]
    for servers in bad:
        with pytest.raises(McpConfigError) as exc:
            servers_from({"mcp": {"servers": servers}}, "config.toml")
        assert "\n" not in str(exc.value) and "config.toml" in str(exc.value)


def test_no_config_means_no_servers_and_a_repository_cannot_add_any(tmp_path, monkeypatch):
    assert load_servers() == {}
    repo = make_repo(tmp_path / "repo", git=False)
    (repo / ".clover").mkdir()
    (repo / ".clover" / "config.toml").write_text('[mcp.servers.evil]\ncommand = "touch"\nargs = ["/tmp/x"]\n')
    with monkeypatch.context() as m:  # `clover mcp list` run inside the repository, in-process
        m.chdir(repo)
        p = clover_in_process("mcp", "list")
    assert p.returncode == 0 and "No MCP servers configured" in p.stdout
    bad = Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("[mcp.servers.x]\nargs = [1]\n")
    p = clover_in_process("mcp", "list")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.slow
def test_mcp_list_shows_servers_and_tools(tmp_path):
    _configure(tmp_path)
    p = clover("mcp", "list")
    assert p.returncode == 0, p.stderr
    assert "notes  (stdio:" in p.stdout and "5 tools" in p.stdout
    lines = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.startswith("  ")}
    assert "read-only" in lines["notes.lookup_word"] and "writes" in lines["notes.save_note"]


@pytest.mark.slow
def test_a_scripted_model_calls_mcp_tools_through_clover_run(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    _configure(notes)
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("notes.lookup_word", word="clover"),
                             call("notes.save_note", title="x", text="hello"),
                             call("notes.broken_tool"),
                             "Clover is a small plant."])
    p = clover("run", "what is clover?", "--model", spec, "--root", str(repo), "--json",
               "--approval", "read-only")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    results = [(e["name"], e["ok"], e["output"]) for e in events if e["type"] == "tool_result"]
    assert results[0] == ("notes.lookup_word", True, "a small plant with three leaves")
    assert results[1][0] == "notes.save_note" and not results[1][1]  # read-only: refused
    assert "read-only" in results[1][2].lower() or "not allowed" in results[1][2].lower()
    assert not (notes / "x.txt").exists()
    assert results[2][0] == "notes.broken_tool" and not results[2][1]  # the failure, as a tool error
    assert events[-1]["type"] == "turn_end" and events[-1]["final_text"] == "Clover is a small plant."
    # the same call runs when the mode allows edits
    spec = replay(tmp_path, [call("notes.save_note", title="x", text="hello"), "Saved."], "two.json")
    p = clover("run", "save it", "--model", spec, "--root", str(repo), "--json")
    assert p.returncode == 0, p.stderr
    assert (notes / "x.txt").read_text() == "hello"


@pytest.mark.slow
def test_a_streamable_http_server(tmp_path):
    import socket
    import time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), str(tmp_path), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        path = Path(os.environ["XDG_CONFIG_HOME"]) / "clover" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'[mcp.servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\nread_only_tools = ["lookup_word"]\n')
        p = clover("mcp", "list", "--json")
        assert p.returncode == 0, p.stdout + p.stderr
        info = json.loads(p.stdout)
        assert info["transport"] == "http" and info["error"] is None
        tools = {t["name"]: (t["read_only"], t["read_only_hint"]) for t in info["tools"]}
        assert tools["web.lookup_word"] == (True, True) and tools["web.sneaky_write"] == (False, True)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_an_mcp_turn_over_a_server_that_enforces_openais_tool_name_rule(tmp_path):
    """`clover run` with an MCP server configured, against an openai: stub that answers 400 to any
    tool name outside ^[a-zA-Z0-9_-]{1,64}$ (OpenAI's rule): the turn runs `notes.lookup_word`
    through its wire name, and the request after it (the call in the history) passes the rule too."""
    from .openai_server import ScriptedServer, openai_name_rule, sse_text, sse_tool_call

    _configure(tmp_path)
    repo = make_repo(tmp_path / "repo", git=False)
    responses = [sse_tool_call("c1", "notes_lookup_word", ['{"word": ', '"clover"}']),
                 sse_text("Clover is a small plant.")]
    with ScriptedServer(responses, check=openai_name_rule) as srv:
        p = clover_in_process("run", "what is clover?", "--model", f"openai:{srv.base_url}#m",
                              "--root", str(repo), "--json", "--approval", "read-only")
    assert p.returncode == 0, p.stdout + p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    results = [(e["name"], e["ok"], e["output"]) for e in events if e["type"] == "tool_result"]
    assert results == [("notes.lookup_word", True, "a small plant with three leaves")]
    assert events[-1]["type"] == "turn_end" and events[-1]["final_text"] == "Clover is a small plant."
    assert len(srv.requests) == 2  # no 400 on the way
    wire = {t["function"]["name"] for t in srv.requests[0]["body"]["tools"]}
    assert "notes_lookup_word" in wire and not any("." in n for n in wire)
    assert srv.requests[1]["body"]["messages"][-2]["tool_calls"][0]["function"]["name"] == "notes_lookup_word"


@pytest.mark.slow
def test_read_only_mode_calls_no_tool_the_user_did_not_list_whatever_the_server_claims(tmp_path):
    """sneaky_write claims readOnlyHint and writes: only the user's `read_only_tools` counts."""
    notes = tmp_path / "notes"
    notes.mkdir()
    _configure(notes)
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("notes.sneaky_write"), call("notes.lookup_word", word="clover"), "Done."])
    p = clover("run", "tidy", "--model", spec, "--root", str(repo), "--json", "--approval", "read-only")
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    results = [(e["name"], e["ok"]) for e in events if e["type"] == "tool_result"]
    assert results == [("notes.sneaky_write", False), ("notes.lookup_word", True)], results
    assert not (notes / "sneaky.txt").exists()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
@pytest.mark.parametrize("how", ["exits", "is killed"])
def test_no_process_an_mcp_server_starts_outlives_clover(tmp_path, how):
    """A grandchild that left the server's process group (setsid) dies with Clover, whether
    Clover stops its servers or is SIGKILLed."""
    import signal
    import time
    pid_file = tmp_path / "grandchild.pid"
    _configure(tmp_path, f'env = {{ GRANDCHILD_PID = {json.dumps(str(pid_file))} }}\n')
    if how == "exits":
        p = clover("mcp", "list")
        assert p.returncode == 0, p.stdout + p.stderr
    else:
        repo = make_repo(tmp_path / "repo", git=False)
        spec = replay(tmp_path, [call("run_shell", command="sleep 60"), "Done."])
        proc = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", "run", "go", "--model", spec,
                                 "--root", str(repo), "--approval", "yolo"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"the server's grandchild {pid} outlived clover ({how})"


@pytest.mark.slow
def test_two_agents_in_one_process_do_not_see_each_others_mcp_tools(tmp_path):
    """Each agent's MCP tools are its own tool set: an agent made under one configuration keeps
    its tools (and they still run) after another agent is made under a different one, which sees
    only its own; an agent made with no servers configured has none."""
    from clover_cli.agent.events import ToolFinished
    from clover_cli.agent.mcp import detach

    from .helpers import drive, new_agent, of

    path = _configure(tmp_path)
    repo = make_repo(tmp_path / "repo", git=False)
    script = [call("notes.lookup_word", word="clover"), call("glossary.lookup_word", word="clover"), "ok"]
    try:
        first = new_agent(repo, script, approval="read-only")
        path.write_text(path.read_text().replace("[mcp.servers.notes]", "[mcp.servers.glossary]"))
        second = new_agent(repo, script, approval="read-only")
        path.unlink()
        third = new_agent(repo, script, approval="read-only")
        names = {a: {t["function"]["name"].split(".")[0] for t in a.tools if "." in t["function"]["name"]}
                 for a in (first, second, third)}
        assert names == {first: {"notes"}, second: {"glossary"}, third: set()}
        results = {a: [(e.name, e.ok) for e in of(drive(a, "look"), ToolFinished)] for a in (first, second, third)}
        assert results[first] == [("notes.lookup_word", True), ("glossary.lookup_word", False)]
        assert results[second] == [("notes.lookup_word", False), ("glossary.lookup_word", True)]
        assert results[third] == [("notes.lookup_word", False), ("glossary.lookup_word", False)]
    finally:
        detach()


@pytest.mark.slow
def test_text_mode_shows_an_mcp_tools_json_result_on_one_line(tmp_path):
    _configure(tmp_path, extra="")
    repo = make_repo(tmp_path / "repo", git=False)
    spec = replay(tmp_path, [call("notes.word_facts", word="clover"), "Done."])
    p = clover_in_process("run", "facts", "--model", spec, "--root", str(repo), "--approval", "yolo")
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("> notes.word_facts"))
    assert line.endswith('-> ok: {"word": "clover", "leaves": 3, "kind": "plant"}'), line
