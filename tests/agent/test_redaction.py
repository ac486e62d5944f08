"""The API key never reaches what Clover prints or writes (clover_cli/agent/redact.py): a server
that quotes it in a 400 error, or echoes it in its streamed answer (split over chunks), gets it
neither into `clover run`'s output (text and --json, stdout and stderr) nor into the session
file. Real `clover run` processes against a scripted server on 127.0.0.1."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from clover_cli.agent import redact

from .helpers import make_repo
from .openai_server import ScriptedServer, sse_text

KEY = "sk-live-9Qz3xW7e1Rb5Kt2M"


def run_clover(tmp_path, server, *extra):
    repo = make_repo(tmp_path / "repo", git=False)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "clover_cli.cli", "run", "say hi", "--root", str(repo),
                           "--model", f"openai:{server.base_url}#m", *extra],
                          env=env, capture_output=True, text=True, timeout=120)
    sessions = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.jsonl"))
    return proc, sessions


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_a_key_quoted_in_a_server_error_is_redacted(tmp_path, extra):
    error = {"status": 400, "body": {"error": {"message": f"invalid api key: Bearer {KEY}",
                                               "type": "invalid_request_error"}}}
    with ScriptedServer([error] * 4) as server:
        proc, sessions = run_clover(tmp_path, server, *extra)
    assert server.requests and server.requests[0]["headers"].get("Authorization") == f"Bearer {KEY}"
    everything = proc.stdout + proc.stderr + sessions
    assert KEY not in everything, everything
    assert "invalid api key: Bearer [REDACTED]" in everything, everything


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_a_key_echoed_in_the_answer_over_several_chunks_is_redacted(tmp_path, extra):
    answer = sse_text("Your key is s", KEY[1:9], KEY[9:], " and that is all.")
    with ScriptedServer([answer]) as server:
        proc, sessions = run_clover(tmp_path, server, *extra)
    assert proc.returncode == 0, proc.stderr
    everything = proc.stdout + proc.stderr + sessions
    assert KEY not in everything and KEY[:9] not in proc.stdout, everything
    assert "[REDACTED] and that is all." in proc.stdout, proc.stdout
    assert sessions and "[REDACTED]" in sessions


def test_the_stream_holds_back_only_what_may_start_a_key(monkeypatch):
    monkeypatch.setattr(redact, "_values", [KEY])
    out = io.StringIO()
    stream = redact.RedactingStream(out)
    for piece in ("plain s", "k-live-", "9Qz3xW7e1Rb5Kt2M!", " next s", "ky\n"):
        stream.write(piece)
    assert out.getvalue() == "plain [REDACTED]! next sky\n"
    stream.write("tail sk-")
    assert out.getvalue().endswith("tail ")
    stream.release()
    assert out.getvalue().endswith("tail sk-")


def test_events_are_scrubbed_in_order_and_an_approval_keeps_its_future(monkeypatch):
    from concurrent.futures import Future

    from clover_cli.agent import events as ev
    monkeypatch.setattr(redact, "_values", [KEY])
    r = redact.EventRedactor()
    shown = []
    future: Future = Future()
    for e in (ev.BlockText("key: s", 0), ev.BlockText(KEY[1:5], 0), ev.BlockText(KEY[5:] + " ok", 0),
              ev.BlockText("tail s", 1), ev.Notice(f"server said {KEY}"),
              ev.ApprovalRequested("c1", "run_shell", {"command": f"echo {KEY}"}, f"echo {KEY}", "echo", future)):
        shown.extend(r.feed(e))
    shown.extend(r.release())
    text = "".join(e.text for e in shown if isinstance(e, ev.BlockText))
    assert text == "key: [REDACTED] oktail s" and KEY not in repr(shown)
    assert [type(e).__name__ for e in shown][-2:] == ["Notice", "ApprovalRequested"]
    assert shown[-1].future is future and shown[-1].arguments == {"command": "echo [REDACTED]"}
