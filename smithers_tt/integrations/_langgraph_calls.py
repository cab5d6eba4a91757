"""The model calls of a LangGraph thread, read from the AI messages its nodes write.

A node that called a model writes the ``AIMessage`` it got back; LangChain's chat models fill
its ``usage_metadata`` (tokens) and ``response_metadata`` (model, finish reason, and the
provider's own ``token_usage``). Each such message in a task's writes is one call of that node
(its ``task_path`` names it), recorded when the saver stores the writes, with the frame of the
checkpoint the step makes. A message with neither is no evidence of a call and is left out;
the request is not known here (it was whatever the node sent), so it is not recorded.

A task also writes AI messages that are no call of its own: a node that returns the whole
message list (``add_messages`` keeps one message per id, so that is harmless to the state), and
a subgraph's node, whose output is the subgraph's state, holding every earlier message and the
replies its inner nodes got (recorded in the subgraph's own run, under those nodes). So a
message whose id the task's input checkpoint already holds, or the newest checkpoint of the
task's own subgraph, is not a call (:class:`CallsSeen`); a message without an id is new (the
reducer gives it one). And a ``Send`` task's path names the index of its send, not its node:
the node is the one that send goes to, in the same input checkpoint.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smithers_tt._model_calls import ModelCall, usage_tokens
from smithers_tt.checkpoint import validate
from smithers_tt.errors import CheckpointInvalid
from smithers_tt.integrations._langgraph_tasks import PUSH, TASKS


def node_of(task_path: str, sends: Sequence[str] = ()) -> str:
    """The node a task ran, from its path (``"~__pregel_pull, agent"`` -> ``agent``); a
    ``Send`` task's (``"~__pregel_push, 0000000002, ..."``) is where the step's third send
    goes, given the ``sends`` of its input checkpoint."""
    parts = [part.strip() for part in task_path.lstrip("~").split(",")]
    if parts[0] == PUSH and len(parts) > 1 and parts[1].isdigit():
        index = int(parts[1])
        return sends[index] if index < len(sends) and sends[index] else "langgraph"
    return parts[-1] or "langgraph"


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


def _ids(value: Any, found: set[str]) -> set[str]:
    """The ids of the AI messages in ``value``, also inside mappings (a graph's input, held
    by its ``__start__`` channel), added to ``found``."""
    if isinstance(value, Mapping):
        for item in value.values():
            _ids(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _ids(item, found)
    elif getattr(value, "type", None) == "ai" and isinstance(getattr(value, "id", None), str):
        found.add(value.id)
    return found


def calls_in_writes(
    writes: Sequence[tuple[str, Any]], seen: frozenset[str] = frozenset()
) -> list[ModelCall]:
    """One call per AI message in ``writes`` that carries usage or response metadata and whose
    id is not in ``seen``."""
    found = []
    for _, value in writes:
        for message in _messages(value):
            if getattr(message, "id", None) in seen:
                continue
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


@dataclass(frozen=True, slots=True)
class StepInput:
    """What a checkpoint tells of the calls the tasks that run from it write: the ids of the AI
    messages it holds, and the node each of its pending sends goes to."""

    seen: frozenset[str]
    sends: tuple[str, ...]

    @classmethod
    def of(cls, channel_values: Mapping[str, Any]) -> StepInput:
        sends = channel_values.get(TASKS) or ()
        return cls(
            frozenset(_ids(channel_values, set())),
            tuple(str(getattr(send, "node", "")) for send in sends)
            if isinstance(sends, list | tuple)
            else (),
        )


_NONE = StepInput(frozenset(), ())


WAIT_S = 2.0
"""How long a task's writes wait for their input checkpoint to be stored: LangGraph stores a
step's checkpoint in the background, after the one before it, while its tasks' writes are
stored as each task ends, so they may come first."""


class CallsSeen:
    """The inputs of recent checkpoints, by thread, namespace and checkpoint id, and the newest
    checkpoint of each subgraph namespace, as this process stored them (a bounded cache: a
    checkpoint it did not store is read from the store when a task's writes need it)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._cond = threading.Condition()
        self._inputs: OrderedDict[tuple[str, str, str], StepInput] = OrderedDict()
        self._newest: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()

    def _keep(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._size:
            cache.popitem(last=False)
        self._cond.notify_all()

    def stored(
        self, thread_id: str, ns: str, checkpoint_id: str, channel_values: Mapping[str, Any]
    ) -> None:
        """A checkpoint is being stored with these values."""
        step = StepInput.of(channel_values)
        with self._cond:
            self._keep(self._inputs, (thread_id, ns, checkpoint_id), step)
            if ns:
                self._keep(self._newest, (thread_id, ns), step.seen)

    def _input(
        self, where: tuple[str, str, str], load: Callable[[], Mapping[str, Any] | None]
    ) -> StepInput:
        """The input of checkpoint ``where``: as this process stored it, else as the store
        holds it, else as this process stores it within :data:`WAIT_S` (else nothing known)."""
        with self._cond:
            step = self._inputs.get(where)
        if step is not None:
            return step
        values = load()
        with self._cond:
            if values is not None:
                self._keep(self._inputs, where, StepInput.of(values))
            elif not self._cond.wait_for(lambda: where in self._inputs, WAIT_S):
                return _NONE
            return self._inputs[where]

    def calls(
        self,
        writes: Sequence[tuple[str, Any]],
        where: tuple[str, str, str],
        task: tuple[str, str],
        load: Callable[[], Mapping[str, Any] | None],
    ) -> tuple[str, list[ModelCall]]:
        """``(node, calls)`` of a task's ``writes`` to checkpoint ``where`` (thread,
        namespace, checkpoint id); ``task`` is its id and path; ``load`` reads that
        checkpoint's channel values from the store (None: not there)."""
        task_id, task_path = task
        calls = calls_in_writes(writes)
        if not calls:
            return node_of(task_path), calls
        step = self._input(where, load)
        node = node_of(task_path, step.sends)
        thread_id, ns, _ = where
        inner = f"{ns}|{node}:{task_id}" if ns else f"{node}:{task_id}"
        with self._cond:
            seen = step.seen | self._newest.get((thread_id, inner), frozenset())
        return node, calls_in_writes(writes, seen)
