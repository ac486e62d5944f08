"""`hf:` downloads and `clover models pull` against a Hub stand-in on 127.0.0.1
(tests/engine/hub_server.py; engine/hub.py): progress on stderr, resume after a kill with a Range
request, safetensors only, one line for a missing or gated repository, and the download loads."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clover_cli.engine import hub
from clover_cli.engine.loader import ModelLoadError, bundled_tiny_dir, load_model

from hub_server import SHA, HubRepo, HubServer

PAUSE_AFTER = 1 << 20  # the throttled file stops here until the test releases it
DEADLINE_S = 90  # the longest a test waits for the client to reach the pause


def _tiny_repo(**kw) -> HubRepo:
    """The bundled tiny checkpoint, plus what Clover must never fetch."""
    files = {p.name: p.read_bytes() for p in bundled_tiny_dir().iterdir() if p.is_file()}
    files.update({"pytorch_model.bin": b"\x80\x02pickle" * 64, "modeling_evil.py": b"raise SystemExit\n",
                  "model.gguf": b"GGUF" * 64, "onnx/model.safetensors": b"x" * 64})
    return HubRepo(files, **kw)


def _env(tmp_path: Path, hub_url: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.upper().endswith("_PROXY") and k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(HF_ENDPOINT=hub_url, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HOME=str(tmp_path / "hf"),
               NO_PROXY="127.0.0.1,localhost", HF_HUB_DISABLE_TELEMETRY="1")
    return env


def _pull(env: dict, spec: str, **kw):
    return subprocess.run([sys.executable, "-m", "clover_cli.cli", "models", "pull", spec], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180, **kw)


def _partial(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "hub" / "models--acme--tiny" / "blobs").glob("*.incomplete"))


@pytest.mark.slow
def test_pull_resumes_after_a_kill_and_takes_safetensors_only(tmp_path, monkeypatch):
    weights = (bundled_tiny_dir() / "model.safetensors").read_bytes()
    with HubServer({"acme/tiny": _tiny_repo()}, throttle="model.safetensors", pause_after=PAUSE_AFTER) as server:
        env = _env(tmp_path, server.url)
        first = subprocess.Popen([sys.executable, "-m", "clover_cli.cli", "models", "pull", "hf:acme/tiny"],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + DEADLINE_S
        while not (server.paused.is_set() and _partial(tmp_path)
                   and _partial(tmp_path)[0].stat().st_size >= PAUSE_AFTER):
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline, "the client never reached the throttled file's pause"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first_err = first.communicate(timeout=30)[1]
        server.release.set()
        (part,) = _partial(tmp_path)
        have = part.stat().st_size
        assert PAUSE_AFTER <= have < len(weights)
        assert "model.safetensors" in first_err and "4.4 MiB" in first_err  # its progress line
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
        assert hub.cache_state("acme/tiny") == "partial"
        assert not hub.snapshot_complete(hub.cached_snapshot("acme/tiny"))

        second = _pull(env, "hf:acme/tiny")
        assert second.returncode == 0, second.stderr
        gets = [r for r in server.requested("/resolve/" + SHA + "/model.safetensors") if r[0] == "GET"]
        assert gets[-1][2] == f"bytes={have}-"  # the second run asked only for the rest
        assert f"resuming at {have / (1 << 20):.1f} MiB" in second.stderr
        assert "%" in second.stderr and "done" in second.stderr  # progress
        for suffix in (".bin", ".py", ".gguf", "onnx/model.safetensors"):
            assert not server.requested(suffix), suffix  # listed by the Hub, never asked for
    snap = hub.cached_snapshot("acme/tiny")
    assert (snap / "model.safetensors").read_bytes() == weights
    assert not _partial(tmp_path) and hub.cache_state("acme/tiny") == "yes"
    assert sorted(p.name for p in snap.iterdir()) == sorted(
        p.name for p in bundled_tiny_dir().iterdir() if hub.wanted(p.name))  # no README.md either
    lines = second.stdout.splitlines()
    assert lines[0] == str(snap) and any(line.startswith("fits cpu (CPU): yes in float32") for line in lines)


def test_missing_and_gated_repositories_are_one_line(tmp_path):
    with HubServer({"acme/gated": _tiny_repo(gated=True)}) as server:
        env = _env(tmp_path, server.url)
        missing, gated = _pull(env, "hf:acme/missing"), _pull(env, "acme/gated")
    assert missing.returncode == 2 and gated.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"clover: error: hf:acme/missing: no such model on the Hub ({server.url}), or it is private "
        "(log in with `hf auth login` or set HF_TOKEN)"]
    assert gated.stderr.strip().splitlines() == [
        "clover: error: hf:acme/gated is gated: accept its terms on its Hub page, then log in with "
        "`hf auth login` or set HF_TOKEN"]
    assert missing.stdout == gated.stdout == ""


def test_an_unreachable_hub_is_one_line(tmp_path):
    with HubServer({}) as server:
        url = server.url  # stopped on leaving: nothing listens there any more
    out = _pull(_env(tmp_path, url), "hf:acme/tiny")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"clover: error: hf:acme/tiny: cannot reach {url}") and "again to resume" in line


def test_an_hf_spec_downloads_on_first_use_and_loads(tmp_path, monkeypatch, capsys):
    """load_model("hf:...") in process: the cache is empty, so it downloads (safetensors only),
    then loads; the second load reads the cache without asking the Hub."""
    with HubServer({"acme/tiny": _tiny_repo()}) as server:
        for k, v in _env(tmp_path, server.url).items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "ENDPOINT", server.url)  # these are read at import time
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            server.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        lm = load_model("hf:acme/tiny")
        assert lm.name == "hf:acme/tiny" and lm.family.name == "clover"
        asked = len(server.requests)
        load_model("hf:acme/tiny")
        assert len(server.requests) == asked
        assert not server.requested(".bin") and not server.requested(".py")
    captured = capsys.readouterr()
    assert captured.out == "" and "downloading hf:acme/tiny" in captured.err


def test_a_partial_download_is_not_taken_for_a_checkpoint(tmp_path, monkeypatch):
    """A snapshot whose weights never arrived is not loaded: offline it is one line saying so."""
    snap = tmp_path / "hub" / "models--acme--cut" / "snapshots" / SHA
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hub.cache_state("acme/cut") == "partial"
    with pytest.raises(hub.HubError, match=r"hf:acme/cut is only partly in the local Hugging Face cache"):
        hub.resolve("acme/cut")


def test_a_release_that_cannot_fit_is_not_downloaded(tmp_path, monkeypatch):
    """The fit check runs on the listed weight bytes once config.json is in, before any weight
    file is fetched: a 4 TiB release is refused in one line and its weights never requested."""
    repo = _tiny_repo(listed={"model.safetensors": 4 << 40})
    with HubServer({"acme/huge": repo}) as server:
        for k, v in _env(tmp_path, server.url).items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",  # read at import, like ENDPOINT
                            server.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        with pytest.raises(ModelLoadError) as info:
            load_model("hf:acme/huge", device="cpu")
        message = str(info.value)
        assert "\n" not in message and message.startswith("hf:acme/huge: does not fit cpu")
        assert message.endswith("the weights were not downloaded")
        assert server.requested("config.json")
        assert not [r for r in server.requested(".safetensors") if r[0] == "GET"]
