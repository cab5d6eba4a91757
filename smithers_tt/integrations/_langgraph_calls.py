"""The model calls of a LangGraph thread, read from the AI messages its nodes write.

A node that called a model writes the ``AIMessage`` it got back; LangChain's chat models fill
its ``usage_metadata`` (tokens) and ``response_metadata`` (model, finish reason, and the
provider's own ``token_usage``). Each such message in a task's writes is one call of that node
(its ``task_path`` names it), recorded when the saver stores the writes, with the frame of the
checkpoint the step makes. A message with neither is no evidence of a call and is left out;
the request is not known here (it was whatever the node sent), so it is not recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from smithers_tt._model_calls import ModelCall, usage_tokens
from smithers_tt.checkpoint import validate
from smithers_tt.errors import CheckpointInvalid


def node_of(task_path: str) -> str:
    """The node a task ran, from its path (``"~__pregel_pull, agent"`` -> ``agent``)."""
    return task_path.rsplit(",", 1)[-1].strip() or "langgraph"


def _messages(value: Any) -> Iterable[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from _messages(item)
    elif getattr(value, "type", None) == "ai":
        yield value


def _reply(message: Any) -> Any:
    reply = {"role": "assistant", "content": getattr(message, "content", None)}
    calls = getattr(message, "tool_calls", None)
    if calls:
        reply["tool_calls"] = calls
    try:
        validate(reply, subject="reply")
    except CheckpointInvalid:  # content LangChain allows but JSON does not: keep the text
        reply = {"role": "assistant", "content": str(reply["content"])}
    return reply


def calls_in_writes(writes: Sequence[tuple[str, Any]]) -> list[ModelCall]:
    """One call per AI message in ``writes`` that carries usage or response metadata."""
    found = []
    for _, value in writes:
        for message in _messages(value):
            usage = getattr(message, "usage_metadata", None)
            meta = getattr(message, "response_metadata", None)
            meta = meta if isinstance(meta, Mapping) else {}
            if not usage and not meta:
                continue
            tokens = usage_tokens(usage if usage else meta.get("token_usage") or meta.get("usage"))
            model = meta.get("model_name") or meta.get("model")
            finish = meta.get("finish_reason") or meta.get("done_reason") or meta.get("stop_reason")
            found.append(
                ModelCall(
                    model if isinstance(model, str) else None,
                    None,
                    _reply(message),
                    finish if isinstance(finish, str) else None,
                    **tokens,
                )
            )
    return found
