"""A stand-in for the Hugging Face Hub on 127.0.0.1, answering what huggingface_hub asks for a
download (read from its 2.x source: `HfApi.model_info`, `HfApi.list_repo_tree`,
`get_hf_file_metadata`) and what engine/hub.py then fetches:

- `GET /api/models/ORG/NAME/revision/REV` -> `{"id", "sha", ...}`; a missing repo is 404 with
  `X-Error-Code: RepoNotFound` (huggingface_hub's RepositoryNotFoundError)
- `GET /api/models/ORG/NAME/tree/SHA?recursive=True` -> the file list (`type`, `path`, `size`,
  `oid`, and `lfs` {`oid` = SHA-256, `size`, `pointerSize`} for weights)
- `HEAD|GET /ORG/NAME/resolve/REV/PATH` with `X-Repo-Commit`, `ETag` (`X-Linked-Etag` /
  `X-Linked-Size` for LFS files), `Accept-Ranges: bytes`; `Range: bytes=N-` gets 206 and
  `Content-Range`; a gated repo answers 401 with `X-Error-Code: GatedRepo`

Every request is recorded (method, path, Range). One file can be throttled: after `pause_after`
bytes of a whole-file GET the handler waits (bounded) for `release`, so a test can kill the client
mid-file at a known point. Loopback only; `stop()` (or leaving the `with`) shuts it down.
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

SHA = "0123456789abcdef0123456789abcdef01234567"
PIECE = 64 << 10
WAIT_S = 60  # the longest a throttled handler waits for `release`


class HubRepo:
    """One repository: path -> bytes; `gated` repos refuse file requests without a token;
    `listed` overrides the size the file list gives (a release far larger than a test can hold)."""

    def __init__(self, files: dict[str, bytes], gated: bool = False, listed: dict[str, int] | None = None):
        self.files, self.gated, self.listed = files, gated, dict(listed or {})

    def lfs(self, path: str) -> bool:
        return path.endswith((".safetensors", ".bin", ".gguf"))

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.lfs(path) else hashlib.sha1(data).hexdigest()

    def tree(self) -> list[dict]:
        out = []
        for path, data in sorted(self.files.items()):
            size = self.listed.get(path, len(data))
            entry = {"type": "file", "path": path, "size": size, "oid": hashlib.sha1(data).hexdigest()}
            if self.lfs(path):
                entry["lfs"] = {"oid": self.etag(path), "size": size, "pointerSize": 134}
            out.append(entry)
        return out


class HubServer:
    """`with HubServer({"acme/model": HubRepo(...)}) as hub:` -> `hub.url` for HF_ENDPOINT."""

    def __init__(self, repos: dict[str, HubRepo], throttle: str | None = None, pause_after: int = 0):
        self.repos, self.throttle, self.pause_after = repos, throttle, pause_after
        self.requests: list[tuple[str, str, str | None]] = []
        self.served: dict[str, int] = {}
        self.paused = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "HubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def requested(self, suffix: str) -> list[tuple[str, str, str | None]]:
        """The recorded requests whose path ends with `suffix`."""
        with self._lock:
            return [r for r in self.requests if r[1].endswith(suffix)]

    def _record(self, method: str, path: str, rng: str | None) -> None:
        with self._lock:
            self.requests.append((method, path, rng))

    def _count(self, path: str, n: int) -> None:
        with self._lock:
            self.served[path] = self.served.get(path, 0) + n

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _json(self, status: int, body, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _missing(self, repo: str) -> None:
                self._json(404, {"error": "Repository not found"},
                           {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})

            def do_HEAD(self):
                self._route()

            def do_GET(self):
                self._route()

            def _route(self):
                path = unquote(urlparse(self.path).path)
                server._record(self.command, path, self.headers.get("Range"))
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) >= 6:
                    return self._api("/".join(parts[2:4]), parts[4])
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._file("/".join(parts[:2]), "/".join(parts[4:]))
                self._json(404, {"error": "not found"})

            def _api(self, repo: str, what: str):
                hub = server.repos.get(repo)
                if hub is None:
                    return self._missing(repo)
                if what == "revision":
                    return self._json(200, {"id": repo, "sha": SHA, "private": False,
                                            "gated": "manual" if hub.gated else False})
                if what == "tree":
                    return self._json(200, hub.tree())
                self._json(404, {"error": "not found"})

            def _file(self, repo: str, name: str):
                hub = server.repos.get(repo)
                if hub is None:
                    return self._missing(repo)
                if hub.gated:
                    msg = f"Access to model {repo} is restricted. You must have access to it and be authenticated."
                    return self._json(401, {"error": msg}, {"X-Error-Code": "GatedRepo", "X-Error-Message": msg})
                if name not in hub.files:
                    return self._json(404, {"error": "Entry not found"},
                                      {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": SHA})
                self._send_file(hub, name, hub.files[name])

            def _send_file(self, hub: HubRepo, name: str, data: bytes):
                start, rng = 0, self.headers.get("Range")
                if rng and rng.startswith("bytes=") and rng.endswith("-"):
                    start = int(rng[len("bytes="):-1])
                status = 206 if rng else 200
                self.send_response(status)
                self.send_header("Content-Length", str(len(data) - start))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("X-Repo-Commit", SHA)
                self.send_header("ETag", f'"{hub.etag(name)}"')
                if hub.lfs(name):
                    self.send_header("X-Linked-Etag", f'"{hub.etag(name)}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if self.command == "HEAD":
                    return
                throttle = name == server.throttle and not rng and not server.release.is_set()
                try:
                    for offset in range(start, len(data), PIECE):
                        if throttle and offset - start >= server.pause_after:
                            server.paused.set()
                            server.release.wait(WAIT_S)
                            self.close_connection = True
                            return  # the client is gone (killed) or the test is over
                        piece = data[offset:offset + PIECE]
                        self.wfile.write(piece)
                        self.wfile.flush()
                        server._count(name, len(piece))
                except (BrokenPipeError, ConnectionResetError):
                    return

        return Handler
