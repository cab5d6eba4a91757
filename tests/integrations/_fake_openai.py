"""A small OpenAI-compatible server for the tests: ``POST /v1/chat/completions``.

Replies are computed from the request's messages only (deterministic). Every request's
message list is appended to a JSON-lines log file, so tests can compare what the model was
asked across processes. The server runs in a thread of the test process, so it outlives the
child processes the tests kill.

Scripted behaviour, chosen by the request:

* last message from a tool: ``"tool said <result>"``;
* last user message starting ``TOOL:``: a call of tool ``add`` with ``{"a": 2, "b": 3}``;
* last user message containing ``reply in JSON``: ``sure! 42`` until some message of the
  conversation says it was rejected, then ``{"answer": 42}``;
* otherwise ``"answer <n> to <prompt>"`` where ``n`` counts the user messages.

``hang_at=n`` holds the first request with ``n`` user messages until :meth:`release` (and
sets :attr:`hung`); ``fail_at=n`` answers the first request with ``n`` user messages with
HTTP 500.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def user_turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")


def reply_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    users = [m for m in messages if m.get("role") == "user"]
    prompt = str(users[-1].get("content")) if users else ""
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"tool said {last.get('content')}"}
    if prompt.startswith("TOOL:"):
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{len(messages)}",
                    "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 3})},
                }
            ],
        }
    if "reply in JSON" in prompt or any("rejected" in str(m.get("content")) for m in users):
        rejected = any("rejected" in str(m.get("content")) for m in users)
        return {"role": "assistant", "content": '{"answer": 42}' if rejected else "sure! 42"}
    return {"role": "assistant", "content": f"answer {len(users)} to {prompt}"}


class FakeOpenAI:
    """The server; ``url`` is its ``/v1`` base URL, ``log`` its request log."""

    def __init__(self, log: Path, *, hang_at: int | None = None, fail_at: int | None = None):
        self.log = Path(log)
        self.hang_at, self.fail_at = hang_at, fail_at
        self.hung = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.count = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the test output quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = server.handle(self.path, body)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client was killed meanwhile
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}
        messages = body["messages"]
        turns = user_turns(messages)
        with self._lock:
            self.count += 1
            with self.log.open("a") as out:
                out.write(json.dumps(messages, sort_keys=True) + "\n")
            hang = self.hang_at == turns and not self.hung.is_set()
            fail = self.fail_at == turns
            if fail:
                self.fail_at = None
            if hang:
                self.hung.set()
        if hang:
            self._release.wait(60)
        if fail:
            return 500, {"error": {"message": "scripted failure", "type": "server_error"}}
        message = reply_for(messages)
        return 200, {
            "id": f"chatcmpl-{self.count}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def requests(self) -> list[list[dict[str, Any]]]:
        """Every request's messages so far, in arrival order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def release(self) -> None:
        self._release.set()

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()
