"""OpenAI's chat schema, whatever server answered: message normalisation and streamed replies.

OpenAI-compatible servers answer in shapes OpenAI itself refuses when they are sent back:
vLLM returns ``tool_calls: []`` on plain answers (OpenAI: 400 "empty array"), servers add
fields of their own (a tool call's ``index``, ``reasoning_content``), some give a tool call no
id or its arguments as an object. A conversation is checkpointed only in OpenAI's schema, so it
can resume on any server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "refusal")
"""The fields of a chat message OpenAI accepts (everything else is dropped)."""


def _call(raw: Mapping[str, Any], fallback_id: str) -> dict[str, Any]:
    function = raw.get("function") or {}
    arguments = function.get("arguments")
    if arguments is None or arguments == "":
        arguments = "{}"
    elif not isinstance(arguments, str):  # an object: OpenAI wants its JSON text
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return {
        "id": str(raw.get("id") or fallback_id),
        "type": "function",
        "function": {"name": str(function.get("name") or ""), "arguments": arguments},
    }


def normalise_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages in OpenAI's chat schema (see the module documentation).

    A tool call without an id gets ``call_<message index>_<position>``; a tool result whose
    ``tool_call_id`` is missing takes the id of the first call of the assistant message before
    it that no result answered yet.
    """
    out: list[dict[str, Any]] = []
    unanswered: list[str] = []
    for index, raw in enumerate(messages):
        message = {k: raw[k] for k in MESSAGE_KEYS if raw.get(k) is not None}
        role = message.get("role")
        if role == "assistant":
            calls = [
                _call(c, f"call_{index}_{k}") for k, c in enumerate(raw.get("tool_calls") or [])
            ]
            message.pop("tool_calls", None)
            if calls:
                message["tool_calls"] = calls
            message.setdefault("content", None if calls else "")
            unanswered = [c["id"] for c in calls]
        else:
            message.pop("tool_calls", None)
            message.setdefault("content", "")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id is None and unanswered:
                call_id = unanswered[0]
            if call_id is not None:
                message["tool_call_id"] = str(call_id)
                if call_id in unanswered:
                    unanswered.remove(call_id)
        else:
            message.pop("tool_call_id", None)
        out.append(message)
    return out


class StreamedReply:
    """A reply put together from streamed chunks (``chat.completion.chunk`` dicts)."""

    def __init__(self, on_delta: Callable[[str], Any] | None = None) -> None:
        self.on_delta = on_delta
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[Any, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.choices = 0

    def add(self, chunk: Mapping[str, Any]) -> None:
        """Take in one chunk (choice 0 only; a final chunk may carry only ``usage``)."""
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = dict(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self.choices += 1
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
                if self.on_delta is not None:
                    self.on_delta(delta["content"])
            if delta.get("refusal"):
                self.refusal.append(delta["refusal"])
            for call in delta.get("tool_calls") or []:
                self._add_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _add_call(self, call: Mapping[str, Any]) -> None:
        key = call.get("index")
        if key is None:  # servers that send whole calls without an index
            key = call.get("id") or (list(self.calls)[-1] if self.calls else 0)
        slot = self.calls.setdefault(key, {"id": None, "name": "", "arguments": ""})
        if call.get("id"):
            slot["id"] = call["id"]
        function = call.get("function") or {}
        if function.get("name"):
            slot["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot["arguments"] += arguments
        elif arguments is not None:
            slot["arguments"] = arguments

    def message(self) -> dict[str, Any]:
        """The assistant message the chunks made (not yet normalised)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": s["id"],
                    "type": "function",
                    "function": {"name": s["name"], "arguments": s["arguments"]},
                }
                for s in self.calls.values()
            ]
        return message
