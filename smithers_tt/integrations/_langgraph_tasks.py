"""Which node made an imported pending write: the task path a saver's public records leave out.

A saver's ``CheckpointTuple.pending_writes`` give each write's task id, never its task path,
so an import could not say which node wrote an AI message (its model call would belong to
no node). A node's task (a "pull" task: the node ran because a channel it listens to
changed) has an id LangGraph derives from what the checkpoints keep: the hash of the
checkpoint's id, the namespace and node name, the step it runs in, the marker
``__pregel_pull`` and the node's trigger channels (``langgraph.pregel._algo``: XXH3-128 for
checkpoints of format ``v`` > 1, SHA-1 before). Each node's triggers are the channels its
entry in ``versions_seen`` records, over the thread. :func:`task_paths` computes the id for
each node and keeps the ones that equal a write's task id: a match is exact, never a guess.
A ``Send``'s task has an id made the same way of its node, ``__pregel_push`` and its index in
the checkpoint's pending sends (the channel ``__pregel_tasks``): its path names that index, as
LangGraph's does, and the store names the node from the checkpoint's sends. A write of any
other task (a node never seen finishing a step) gets no path.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from xxhash import xxh3_128_hexdigest

PULL = "__pregel_pull"
PUSH = "__pregel_push"
TASKS = "__pregel_tasks"
"""LangGraph's markers of a node's task and of a ``Send``'s, and the channel of pending sends."""


def pull_task_id(
    checkpoint: Mapping[str, Any], ns: str, step: int, node: str, triggers: Iterable[str]
) -> str:
    """The id LangGraph gives the task of ``node`` that runs in ``step`` from ``checkpoint``
    (of namespace ``ns``), triggered by the channels ``triggers``."""
    return _task_id(checkpoint, ns, step, node, PULL, *sorted(triggers))


def push_task_id(checkpoint: Mapping[str, Any], ns: str, step: int, node: str, index: int) -> str:
    """The id LangGraph gives the task of the ``index``-th pending send of ``checkpoint`` (to
    ``node``), run in ``step``."""
    return _task_id(checkpoint, ns, step, node, PUSH, str(index))


def _task_id(checkpoint: Mapping[str, Any], ns: str, step: int, node: str, *rest: str) -> str:
    namespace = binascii.unhexlify(str(checkpoint["id"]).replace("-", ""))
    parts = [f"{ns}|{node}" if ns else node, str(step), node, *rest]
    data = b"".join(p.encode() for p in parts)
    if checkpoint.get("v", 1) > 1:
        digest = xxh3_128_hexdigest(namespace + data)
    else:
        digest = hashlib.sha1(namespace + data, usedforsecurity=False).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def task_paths(items: Iterable[Any]) -> dict[tuple[str, str], dict[str, str]]:
    """For a thread's checkpoint tuples, ``{(namespace, checkpoint id): {task id: task path}}``
    of the pending writes whose node is found (see the module's docstring). A checkpoint or
    metadata that is not a mapping is passed over (the import refuses it on its own)."""
    items = [i for i in items if isinstance(i.checkpoint, Mapping)]
    triggers: dict[tuple[str, str], set[str]] = {}
    for item in items:
        ns = item.config["configurable"].get("checkpoint_ns", "")
        seen_by = item.checkpoint.get("versions_seen")
        for node, seen in seen_by.items() if isinstance(seen_by, Mapping) else ():
            if isinstance(seen, Mapping):
                triggers.setdefault((ns, str(node)), set()).update(map(str, seen))
    found: dict[tuple[str, str], dict[str, str]] = {}
    for item in items:
        conf = item.config["configurable"]
        meta = item.metadata if isinstance(item.metadata, Mapping) else {}
        ns, step = conf.get("checkpoint_ns", ""), meta.get("step")
        wanted = {task_id for task_id, _, _ in item.pending_writes or []}
        if not wanted or isinstance(step, bool) or not isinstance(step, int):
            continue
        paths: dict[str, str] = {}
        for (where, node), channels in triggers.items():
            if where != ns:
                continue
            try:
                task_id = pull_task_id(item.checkpoint, ns, step + 1, node, channels)
            except (binascii.Error, TypeError, ValueError):  # an id that is no hex uuid
                break
            if task_id in wanted:
                paths[task_id] = f"~{PULL}, {node}"
        paths.update(_send_paths(item.checkpoint, ns, step + 1, wanted))
        if paths:
            found[ns, conf["checkpoint_id"]] = paths
    return found


def _send_paths(
    checkpoint: Mapping[str, Any], ns: str, step: int, wanted: set[str]
) -> dict[str, str]:
    """``{task id: task path}`` of the tasks of ``checkpoint``'s pending sends whose id is
    ``wanted`` (the path names the send's index, as LangGraph's own does)."""
    values = checkpoint.get("channel_values")
    sends = values.get(TASKS) if isinstance(values, Mapping) else None
    paths: dict[str, str] = {}
    for index, send in enumerate(sends if isinstance(sends, list | tuple) else ()):
        node = getattr(send, "node", None)
        if not isinstance(node, str):
            continue
        try:
            task_id = push_task_id(checkpoint, ns, step, node, index)
        except (binascii.Error, TypeError, ValueError):  # an id that is no hex uuid
            break
        if task_id in wanted:
            paths[task_id] = f"~{PUSH}, {index:010d}"
    return paths
