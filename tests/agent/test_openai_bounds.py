"""Every read from an OpenAI-compatible server is bounded in bytes and time, and memory stays
flat: the product's backend runs in a subprocess under a 4 GiB address-space cap against a
hostile server on 127.0.0.1 (tests/agent/hostile_server.py) that never ends its answer, sends
headers a byte at a time, a gzip bomb, 50 MB lines and bodies, a 55 MB `/v1/models`, long
Retry-After waits. Each case must end with one line naming the bound it broke; the server
counts what the client let it send (docs/agent.md, "Bounds on a server's answers")."""
from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest
from in_process import clover

from clover_cli.agent.backends.openai_limits import ANSWER_BYTES, MIB

from .hostile_server import HostileServer

CAP = 4 << 30
# the product's own deadline here, reported in the errors below: far above the few seconds a
# byte-bound case takes (endless_content ~3 s idle), so on a loaded machine too the bytes bound ends it
REQUEST_TIMEOUT = 100.0
SLOW_TIMEOUT = 3.0  # for the server that trickles blank lines: only the deadline can end it
IDLE = 2.0

_CLIENT = """
import json, resource, sys, time
from clover_cli.agent.backends import make_backend
from clover_cli.agent.backends.base import Completion
from clover_cli.agent.events import Notice
results = []
for name, url, deadline in json.loads(sys.argv[1]):
    out = {"name": name, "notices": []}
    began = time.monotonic()
    backend = make_backend(f"openai:{url}#m", request_timeout=deadline, timeout=%(idle)r, retries=1, backoff=0.1)
    try:
        for item in backend.stream([{"role": "user", "content": "hi"}], [], max_new_tokens=16):
            if isinstance(item, Notice):
                out["notices"].append(item.message)
            if isinstance(item, Completion):
                out["text"] = item.text[:100]
    except Exception as e:
        out["error"] = type(e).__name__ + ": " + str(e)
    backend.close()
    out["seconds"] = round(time.monotonic() - began, 1)
    results.append(out)
print(json.dumps({"results": results,
                  "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
""" % {"idle": IDLE}

# behaviour -> what the one-line error must say (the bound it broke)
BOUNDS = {
    "endless_content": "went over 8,388,608 characters",
    "endless_reasoning": "went over 8,388,608 characters",
    "endless_args": "went over 8,388,608 characters",
    "endless_calls": "over 256 tool calls",
    "endless_comments": ("went over 64 MiB", f"within {REQUEST_TIMEOUT:g} s (--request-timeout)"),
    "endless_blank_lines": ("went over 64 MiB", f"within {REQUEST_TIMEOUT:g} s (--request-timeout)"),
    "slow_blank_lines": f"did not finish its answer within {SLOW_TIMEOUT:g} s (--request-timeout)",
    "slow_headers": f"did not answer within {IDLE:g} s (its headers were not complete)",
    "gzip_bomb": "went over 64 MiB (after decompression)",
    "long_line": "a line of over 8 MiB",
    "huge_json": "over 8 MiB",
    "huge_error": "the headers and error body went over 1 MiB",
    "retry_after_hour": "it asks to wait 3600 s before trying again; Clover waits at most 60 s",
}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_every_answer_is_bounded_in_bytes_time_and_memory():
    servers = {name: HostileServer(name) for name in BOUNDS}
    servers["huge_models"] = HostileServer("short", models_bytes=55 << 20)
    servers["busy_once"] = HostileServer("short", busy_first=1)
    try:
        cases = json.dumps([[name, server.url, SLOW_TIMEOUT if name == "slow_blank_lines" else REQUEST_TIMEOUT]
                            for name, server in servers.items()])
        proc = subprocess.run([sys.executable, "-c", _CLIENT, cases], capture_output=True, text=True,
                              timeout=200, preexec_fn=_limit_memory)
    finally:
        for server in servers.values():
            server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    results = {r["name"]: r for r in report["results"]}
    wrong = []
    for name, says in BOUNDS.items():
        error = results[name].get("error", "")
        if not error.startswith("BackendError: ") or "\n" in error or \
                not any(s in error for s in ((says,) if isinstance(says, str) else says)):
            wrong.append(f"{name}: {results[name]}")
        if servers[name].sent > ANSWER_BYTES + 32 * MIB:  # what the client let the server write
            wrong.append(f"{name}: the server could send {servers[name].sent:,} bytes")
    assert not wrong, "\n".join(wrong)
    assert servers["retry_after_hour"].posts == 1  # no hour-long wait, no silent retry
    assert results["huge_models"].get("text") == "ok", results["huge_models"]
    assert servers["huge_models"].sent < 32 * MIB  # the 55 MB description was not read whole
    busy = results["busy_once"]
    assert busy.get("text") == "ok" and len(busy["notices"]) == 1, busy
    assert busy["notices"][0].endswith("busy; trying again in 1 s (retry 1 of 1)"), busy
    assert report["maxrss_mib"] < 1024, report["maxrss_mib"]  # flat: nothing held whole


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_request_timeout_sets_the_deadline_of_clover_run(tmp_path):
    with HostileServer("slow_blank_lines") as server:
        p = clover("run", "hi", "--model", f"openai:{server.url}#m", "--root", str(tmp_path),
                   "--request-timeout", "2", "--json")
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert f"{server.url}/chat/completions did not finish its answer within 2 s (--request-timeout)" \
        in p.stdout + p.stderr


@pytest.mark.timeout(60)
def test_a_retry_wait_is_said_on_screen(tmp_path):
    with HostileServer("short", busy_first=1) as server:
        p = clover("run", "hi", "--model", f"openai:{server.url}#m", "--root", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert f"note: openai: {server.url} returned HTTP 429: busy; trying again in 1 s (retry 1 of 3)" in p.stderr
