"""A tiny forward proxy on 127.0.0.1 for the tests: absolute-URI requests (HTTP_PROXY) are
forwarded, CONNECT (HTTPS_PROXY) is tunnelled; `seen` lists each request line."""
from __future__ import annotations

import select
import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Proxy:
    def __init__(self) -> None:
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_CONNECT(self):
                outer.seen.append(f"CONNECT {self.path}")
                host, port = self.path.rsplit(":", 1)
                try:
                    upstream = socket.create_connection((host, int(port)), timeout=5)
                except OSError:
                    self.send_error(502)
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                conns = [self.connection, upstream]
                try:
                    while True:
                        ready, _, _ = select.select(conns, [], [], 5)
                        if not ready:
                            break
                        for s in ready:
                            data = s.recv(65536)
                            if not data:
                                return
                            (upstream if s is self.connection else self.connection).sendall(data)
                except OSError:
                    pass
                finally:
                    upstream.close()

            def _forward(self):
                outer.seen.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("proxy-connection", "connection", "host")}
                req = urllib.request.Request(self.path, data=body, headers=headers, method=self.command)
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                try:
                    resp = opener.open(req, timeout=10)
                    status, resp_headers, data = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    status, resp_headers, data = e.code, e.headers, e.read()
                self.send_response(status)
                for k, v in resp_headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "Proxy":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
