"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for the backend tests."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse_text(*pieces: str) -> list[dict]:
    """Stream chunks for plain text content."""
    return [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces] + \
        [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]


def sse_tool_call(call_id: str, name: str, arg_pieces: list[str], text: str = "") -> list[dict]:
    """Stream chunks for one native tool call whose arguments arrive in pieces."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]}] if text else []
    chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
    for piece in arg_pieces:
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": piece}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                   "usage": {"prompt_tokens": 2400, "completion_tokens": 7}})  # a prompt with the tools
    return chunks


class ScriptedServer:
    """Answers each POST with the next scripted response: a list of SSE chunks, or
    {"status": N, "body": {...}} for an error, or {"sleep": seconds} to stall, or
    {"raw": bytes, "type": content type} for any body, or {"sse": [chunks], "done": bool,
    "delay": seconds between chunks, "chunked": True for HTTP/1.1 chunked framing}. GET answers come from `gets` ({path: JSON}; else 404), as a
    vLLM (`/v1/models`) or llama.cpp (`/props`) server describes itself. `check(body)` runs on
    every POST before its answer: a response it returns (a real server's refusal) replaces the
    scripted one, which stays queued."""

    def __init__(self, responses: list, gets: dict | None = None, check=None, posts: dict | None = None) -> None:
        self.responses = list(responses)
        self.gets = dict(gets or {})
        self.posts = dict(posts or {})  # other POST paths (/tokenize): {path: body -> (status, JSON)}
        self.check = check
        self.requests: list[dict] = []  # {"path", "headers", "body"}
        self.get_paths: list[str] = []
        self.other_posts: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                outer.get_paths.append(self.path)
                found = self.path in outer.gets
                data = json.dumps(outer.gets.get(self.path, {"error": "not found"})).encode()
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):  # /tokenize: answered from `posts`
                    outer.other_posts.append({"path": self.path, "body": body})
                    status, answer = outer.posts[self.path](body) if self.path in outer.posts else (404, {})
                    data = json.dumps(answer).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                outer.requests.append({"path": self.path, "headers": self.headers, "body": body})
                refusal = outer.check(body) if outer.check else None
                resp = refusal or (outer.responses.pop(0) if outer.responses else sse_text(""))
                if isinstance(resp, dict) and "raw" in resp:  # any 200 answer: {"raw": bytes, "type": ...}
                    self.send_response(resp.get("status", 200))
                    if resp.get("type"):
                        self.send_header("Content-Type", resp["type"])
                    self.send_header("Content-Length", str(len(resp["raw"])))
                    self.end_headers()
                    self.wfile.write(resp["raw"])
                    return
                if isinstance(resp, dict) and "sse" in resp:  # {"sse": [chunks], "done": False}: cut off
                    chunked = resp.get("chunked", False)  # HTTP/1.1 chunked, as llama.cpp streams

                    def send(raw: bytes) -> None:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw) if chunked else raw)
                        self.wfile.flush()
                    if chunked:
                        self.protocol_version = "HTTP/1.1"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    if chunked:
                        self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for chunk in resp["sse"]:
                            data = chunk if isinstance(chunk, str) else json.dumps(chunk)
                            send(f"data: {data}\n\n".encode())
                            time.sleep(resp.get("delay", 0))
                        if resp.get("done", True):
                            send(b"data: [DONE]\n\n")
                        if chunked and not resp.get("drop"):  # "drop": the connection dies mid-answer
                            self.wfile.write(b"0\r\n\r\n")
                            self.wfile.flush()
                    except OSError:  # the client went away (a cancel)
                        pass
                    self.close_connection = True
                    return
                if isinstance(resp, dict) and "sleep" in resp:
                    time.sleep(resp["sleep"])
                    return
                if isinstance(resp, dict):
                    data = json.dumps(resp.get("body", {})).encode()
                    self.send_response(resp["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in resp:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


OPENAI_NAME = r"^[a-zA-Z0-9_-]{1,64}$"


def openai_name_rule(body: dict) -> dict | None:
    """OpenAI's own check of function names (the API's 400, as its error reads): in the tool
    schemas and in the history's calls alike."""
    import re
    names = [(f"tools[{i}].function.name", t.get("function", {}).get("name", ""))
             for i, t in enumerate(body.get("tools") or [])]
    for i, m in enumerate(body.get("messages") or []):
        names += [(f"messages[{i}].tool_calls[{j}].function.name", tc.get("function", {}).get("name", ""))
                  for j, tc in enumerate(m.get("tool_calls") or [])]
    for param, name in names:
        if not re.match(OPENAI_NAME, str(name)):
            return {"status": 400, "body": {"error": {
                "message": f"Invalid '{param}': string does not match pattern. Expected a string that "
                           f"matches the pattern '{OPENAI_NAME}'.",
                "type": "invalid_request_error", "param": param, "code": "invalid_value"}}}
    return None
