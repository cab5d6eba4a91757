"""The model calls of a LangGraph thread, read from the AI messages its nodes write.

A node that called a model writes the ``AIMessage`` it got back; LangChain's chat models fill
its ``usage_metadata`` (tokens) and ``response_metadata`` (model, finish reason, and the
provider's own ``token_usage``). Each such message in a task's writes is a call of that node
(its ``task_path`` names it; a ``Send`` task's names the index of its send, which the store
turns into the send's node). A message with neither is no evidence of a call and is left out;
the request is not known here (it was whatever the node sent), so it is not recorded. The
graph's input (the ``__start__`` task's writes) is no call of the graph.

A message is one call however many tasks write it (a node returning the whole message list, a
subgraph's node returning the subgraph's state): the store keeps one call per message id and
thread, the one of the task of least :func:`task_rank` (see
``smithers_tt/store/ledger/_langgraph_calls.py``), and numbers it with the checkpoint its step
made, whatever order the saves arrive in. LangChain's chat models give their replies ids; a
message without one when the saver reads the writes is a new call each time it is written, as
before (``add_messages`` gives it one in place when LangGraph applies the writes, which may
come before or after the background save reads them).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from smithers_tt._model_calls import ModelCall, usage_tokens
from smithers_tt.checkpoint import validate
from smithers_tt.errors import CheckpointInvalid
from smithers_tt.integrations._langgraph_tasks import PUSH

START = "__start__"
"""The node of the task that writes the graph's input."""


def node_of(task_path: str) -> str | int:
    """The node a task ran, from its path (``"~__pregel_pull, agent"`` -> ``agent``), or for
    a ``Send`` task (``"~__pregel_push, 0000000002, 0000000000"``) the index of its send among
    its input checkpoint's (``2``)."""
    parts = [part.strip() for part in task_path.lstrip("~").split(",")]
    if parts[0] == PUSH and len(parts) > 1 and parts[1].isdigit():
        return int(parts[1])
    return parts[-1] or "langgraph"


def task_rank(configurable: Mapping[str, Any], checkpoint_id: str, task_id: str) -> str:
    """The rank of a task among those of its thread writing the same message: the input
    checkpoints of its namespace's ancestors (LangGraph's ``checkpoint_map``, root first) and
    its own, then ``z`` and its id, in lower-case letters and digits only (so that every
    database compares them alike). A subgraph's task ranks before the parent's task running
    the subgraph (same prefix, longer), and an earlier step before a later one."""
    ancestors = configurable.get("checkpoint_map")
    chain = []
    if isinstance(ancestors, Mapping):
        ordered = sorted(ancestors.items(), key=lambda kv: (kv[0] != "", str(kv[0]).count("|")))
        chain = [str(cid) for _, cid in ordered]
    return "".join(_plain(cid) for cid in [*chain, checkpoint_id]) + "z" + _plain(task_id)


def _plain(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isascii() and ch.isalnum())


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


def calls_in_writes(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, ModelCall]]:
    """``(message id, call)`` per AI message in ``writes`` that carries usage or response
    metadata (a message without an id gets a new one: it is a call each time)."""
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
            message_id = getattr(message, "id", None)
            if not isinstance(message_id, str) or not message_id:
                message_id = f"~{secrets.token_hex(16)}"
            call = ModelCall(
                model if isinstance(model, str) else None,
                None,
                _reply(message),
                finish if isinstance(finish, str) else None,
                **tokens,
            )
            found.append((message_id, call))
    return found
