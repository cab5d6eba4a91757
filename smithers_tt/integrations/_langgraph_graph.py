"""A compiled LangGraph graph as the debugger's graph view draws it, and its nodes' states at
a checkpoint of a thread.

A thread's run stores no graph of LangGraph's nodes (its smithers_tt nodes are the thread's
checkpoint documents and channel values); the compiled graph given to
:func:`~smithers_tt.integrations.langgraph_view.debug` has it. Its nodes and edges are read
from ``compiled.get_graph()`` (``__start__`` and ``__end__`` included; a conditional edge is
marked so), and at the checkpoint a frame shows each node is:

* ``failed`` or ``paused``: a task of the next super-step that raised, or waits on an
  ``interrupt``;
* ``queued``: the next super-step runs it (``StateSnapshot.next``);
* ``finished``: it ran at or before this checkpoint (it has ``versions_seen``); ``__end__``
  once the graph has nothing left to run;
* no state (drawn as pending) otherwise.

The nodes this checkpoint's super-step ran (their ``versions_seen`` differ from the parent
checkpoint's) are the ones the frame touches.
"""

from __future__ import annotations

from typing import Any

from smithers_tt.integrations._langgraph_format import CHECKPOINT_CODEC, payload
from smithers_tt.integrations.langgraph import SmithersSaver

END = "__end__"


def checkpoint_tuple(saver: SmithersSaver, run_id: str, content_hash: str) -> tuple[Any, Any]:
    """The checkpoint document stored as ``content_hash`` in the thread run ``run_id``, its
    config, and LangGraph's ``CheckpointTuple`` of it (None when it was deleted from
    LangGraph's view), as ``(doc, config, found)``."""
    doc = payload(saver.store.read_content(content_hash), CHECKPOINT_CODEC, content_hash)
    thread = saver.store.get_run(run_id).input or {}
    config = {"configurable": {**thread, "checkpoint_id": doc["id"]}}
    return doc, config, saver.get_tuple(config)


def graph_shape(graph: Any) -> dict[str, Any]:
    """The nodes (in the graph's order) and edges of a compiled graph: ``{"nodes": [...],
    "edges": [{"from", "to", "conditional"}]}``."""
    drawn = graph.get_graph()
    return {
        "nodes": [str(node) for node in drawn.nodes],
        "edges": [
            {"from": str(e.source), "to": str(e.target), "conditional": bool(e.conditional)}
            for e in drawn.edges
        ],
    }


def graph_state(saver: SmithersSaver, graph: Any, run_id: str, content_hash: str) -> dict[str, Any]:
    """Each node's state at the checkpoint ``content_hash`` of the thread run ``run_id``, and
    the nodes its super-step ran: ``{"states": {node: state}, "current": [node, ...]}`` (see
    the module's docstring)."""
    nodes = set(graph_shape(graph)["nodes"])
    _, config, found = checkpoint_tuple(saver, run_id, content_hash)
    if found is None:
        return {"states": {}, "current": []}
    seen = found.checkpoint.get("versions_seen") or {}
    parent = saver.get_tuple(found.parent_config) if found.parent_config else None
    before = (parent.checkpoint.get("versions_seen") or {}) if parent is not None else {}
    states = {node: "finished" for node in seen if node in nodes}
    current = sorted(node for node in states if seen.get(node) != before.get(node))
    readable = graph if getattr(graph, "checkpointer", None) is saver else None
    state = (readable or graph.copy({"checkpointer": saver})).get_state(config)
    for task in state.tasks:
        if task.name in nodes:
            states[task.name] = (
                "failed" if task.error else "paused" if task.interrupts else "queued"
            )
    for name in state.next:
        if name in nodes and states.get(name) not in ("failed", "paused"):
            states[name] = "queued"
    if not state.next and not state.interrupts and END in nodes and seen:
        states[END] = "finished"
    return {"states": states, "current": current}
