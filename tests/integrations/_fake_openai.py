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

* last user message starting ``LONG:``: a reply cut off by the length limit (``part one, ``)
  until the model was asked to continue once, then ``part two.``; ``ENDLESS:``: always cut off;
* last user message starting ``EMPTY:``: a completion with no ``choices``.

``hang_at=n`` holds the first request with ``n`` user messages until :meth:`release` (and
sets :attr:`hung`); ``fail_at=n`` answers the first request with ``n`` user messages with
HTTP ``fail_status`` (500).

``provider`` shapes each reply the way OpenAI-compatible servers were seen to answer (the
shapes of issue 19): ``"openai"`` as OpenAI; ``"vllm"`` adds ``tool_calls: []`` to plain
answers and ``reasoning_content: null``; ``"ollama"`` numbers tool calls with a server-only
``index``; ``"llamacpp"`` gives tool calls no id and their arguments as an object;
``"reused-ids"`` (a synthetic shape) numbers calls per reply, so every reply's first call is
``call_0``.
``stream_fault`` spoils the first streamed reply to a request with ``fault_at`` user messages
(1): ``"cut"`` ends the stream after the content with no ``finish_reason`` (no usage, no
``[DONE]``), as a connection cut mid-reply; ``"error"`` sends an error event after the first
piece of content. ``ignore_stream=True`` answers streaming requests with a plain JSON
completion, as servers that ignore ``stream`` do.
``strict=True`` checks every request's messages the way OpenAI does and answers HTTP 400 for
what OpenAI refuses (an empty ``tool_calls``, fields it does not know, a tool result without
``tool_call_id``, arguments that are not a string). A request with ``"stream": true`` is
answered as server-sent events, with a usage chunk when ``stream_options.include_usage``.
``usage`` is ``"plain"`` (prompt tokens = the request's messages, 3 completion tokens),
``"detailed"`` (OpenAI's details too: 1 cached prompt token, 2 reasoning tokens) or None (no
usage at all, as some servers answer).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def user_turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")


CONTINUED = "Your reply was cut off"
_KNOWN = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


def openai_refuses(messages: list[dict[str, Any]]) -> str | None:
    """Why OpenAI would answer 400 to these messages (None: it accepts them)."""
    for n, m in enumerate(messages):
        extra = set(m) - _KNOWN.get(m.get("role"), set())
        if extra:
            return f"messages[{n}]: unrecognized fields {sorted(extra)}"
        if "tool_calls" in m:
            if not m["tool_calls"]:
                return f"messages[{n}].tool_calls: empty array, expected at least 1 element"
            for call in m["tool_calls"]:
                if set(call) != {"id", "type", "function"} or not isinstance(call["id"], str):
                    return f"messages[{n}].tool_calls: bad call {call}"
                if not isinstance(call["function"].get("arguments"), str):
                    return f"messages[{n}].tool_calls: arguments must be a string"
        if m.get("role") == "tool" and not isinstance(m.get("tool_call_id"), str):
            return f"messages[{n}].tool_call_id: expected a string"
        if m.get("role") == "assistant" and m.get("content") is None and not m.get("tool_calls"):
            return f"messages[{n}].content: required without tool_calls"
        if m.get("tool_calls"):
            after = []
            for later in messages[n + 1 :]:
                if later.get("role") != "tool":
                    break
                after.append(later.get("tool_call_id"))
            if sorted(c["id"] for c in m["tool_calls"]) != sorted(after):
                return f"messages[{n}]: tool_calls must be followed by a result for each id"
    return None


def shaped(message: dict[str, Any], provider: str) -> dict[str, Any]:
    """The reply as ``provider`` sends it."""
    message = json.loads(json.dumps(message))
    calls = message.get("tool_calls")
    if provider == "vllm":
        message.setdefault("tool_calls", [])
        message["reasoning_content"] = None
    elif provider == "ollama":
        for k, call in enumerate(calls or []):
            call["index"] = k
    elif provider == "reused-ids":
        for call in calls or []:
            call["id"] = "call_0"
    elif provider == "llamacpp":
        for call in calls or []:
            call["id"] = None
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return message


def finish_for(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    prompts = [
        str(m.get("content")) for m in users if not str(m.get("content")).startswith(CONTINUED)
    ]
    prompt = prompts[-1] if prompts else ""
    continued = str(users[-1].get("content")).startswith(CONTINUED) if users else False
    if prompt.startswith("ENDLESS:") or (prompt.startswith("LONG:") and not continued):
        return "length"
    return "stop"


def reply_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    last = messages[-1]
    users = [m for m in messages if m.get("role") == "user"]
    prompt = str(users[-1].get("content")) if users else ""
    if prompt.startswith(CONTINUED):
        return {"role": "assistant", "content": "part two."}
    if prompt.startswith(("LONG:", "ENDLESS:")):
        return {"role": "assistant", "content": "part one, "}
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

    def __init__(
        self,
        log: Path,
        *,
        hang_at: int | None = None,
        fail_at: int | None = None,
        fail_status: int = 500,
        provider: str = "openai",
        strict: bool = False,
        stream_fault: str | None = None,
        fault_at: int = 1,
        ignore_stream: bool = False,
        usage: str | None = "plain",
    ):
        self.log = Path(log)
        self.hang_at, self.fail_at, self.fail_status = hang_at, fail_at, fail_status
        self.provider, self.strict = provider, strict
        self.stream_fault, self.fault_at, self.ignore_stream = stream_fault, fault_at, ignore_stream
        self.usage = usage
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
                kind = "application/json"
                if isinstance(payload, list):  # server-sent events
                    kind = "text/event-stream"
                    events = [
                        f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n"
                        for chunk in payload
                    ]
                    data = "".join(events).encode()
                else:
                    data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    if status >= 400:  # as a provider's 429 says when to come back: the
                        # openai client then retries at once, not after its own 0.5-8 s backoff
                        self.send_header("retry-after-ms", "1")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client was killed meanwhile
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}
        messages = body["messages"]
        turns = user_turns(messages)
        with self._lock:
            self.count += 1
            with self.log.open("a") as out:
                out.write(json.dumps(messages, sort_keys=True) + "\n")
            fault = None
            if body.get("stream") and self.stream_fault and self.fault_at == turns:
                fault, self.stream_fault = self.stream_fault, None
            hang = self.hang_at == turns and not self.hung.is_set()
            fail = self.fail_at == turns
            if fail:
                self.fail_at = None
            if hang:
                self.hung.set()
        if hang:
            self._release.wait(60)
        if fail:
            return self.fail_status, {"error": {"message": "scripted failure", "type": "error"}}
        if self.strict and (why := openai_refuses(messages)):
            return 400, {"error": {"message": why, "type": "invalid_request_error"}}
        users = [m for m in messages if m.get("role") == "user"]
        if users and str(users[-1].get("content")).startswith("EMPTY:"):
            return 200, {"id": "x", "object": "chat.completion", "model": "fake", "choices": []}
        message = reply_for(messages)
        finish = "tool_calls" if message.get("tool_calls") else finish_for(messages)
        usage: dict[str, Any] | None = {
            "prompt_tokens": len(messages),
            "completion_tokens": 3,
            "total_tokens": 3 + len(messages),
        }
        if self.usage == "detailed":
            usage["prompt_tokens_details"] = {"cached_tokens": 1}  # type: ignore[index]
            usage["completion_tokens_details"] = {"reasoning_tokens": 2}  # type: ignore[index]
        elif self.usage is None:
            usage = None
        head = {"id": f"chatcmpl-{self.count}", "created": 0, "model": body.get("model", "fake")}
        if body.get("stream") and not self.ignore_stream:
            return 200, self._chunks(head, message, finish, usage, body, fault)
        return 200, {
            **head,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": shaped(message, self.provider), "finish_reason": finish}
            ],
            **({} if usage is None else {"usage": usage}),
        }

    def _chunks(
        self,
        head: dict[str, Any],
        message: dict[str, Any],
        finish: str,
        usage: dict[str, Any] | None,
        body: dict[str, Any],
        fault: str | None = None,
    ) -> list[dict[str, Any] | str]:
        """The reply as OpenAI streams it: the role, content in pieces, each tool call's
        name then its arguments in pieces, the finish reason, then (if asked) the usage, then
        ``[DONE]``; spoilt by ``fault`` (see the module docstring)."""
        head = {**head, "object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                **head,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        out: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        out += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
        if fault == "cut":
            return out
        if fault == "error":
            error = {"message": "the server is overloaded", "type": "server_error"}
            return [*out[:2], {"error": error}, "[DONE]"]
        for k, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            first = {"index": k, "id": call["id"], "type": "function"}
            out.append(chunk({"tool_calls": [{**first, "function": {"name": fn["name"]}}]}))
            args = fn["arguments"]
            out += [
                chunk({"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 3]}}]})
                for i in range(0, len(args), 3)
            ]
        out.append(chunk({}, finish))
        if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            out.append({**head, "choices": [], "usage": usage})
        return [*out, "[DONE]"]

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
