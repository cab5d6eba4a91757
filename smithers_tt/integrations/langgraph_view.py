"""A LangGraph thread read as LangGraph: super-steps, channel diffs, and the frames behind them.

:class:`~smithers_tt.integrations.langgraph.SmithersSaver` keeps each thread as a smithers_tt
run, so ``db.debug(saver.run_id(thread_id))`` opens the notebook debugger on it; this module
says what each frame of that run is in LangGraph's words::

    from smithers_tt.integrations.langgraph_view import channel_diff, supersteps

    for step in supersteps(app, config):        # oldest first, every branch
        print(step.step, step.source, step.next, step.interrupts, step.frame_no)
    channel_diff(app, older.config, newer.config)  # what the channels changed, by JSON path

A super-step's ``frame_no`` is the frame of the thread's run that holds its checkpoint, so
``debugger.model.select_frame(step.frame_no)`` shows it in the debugger, and
:func:`describe_frame` says what a frame of such a run holds in LangGraph's terms (with no
graph object at hand: what a debugger can show for any thread).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from smithers_tt.integrations._langgraph_format import (
    CHECKPOINT_CODEC,
    DOC_NODE,
    VALUE_CODEC,
    VALUE_NODE,
    payload,
)
from smithers_tt.integrations._langgraph_graph import checkpoint_tuple, graph_shape, graph_state
from smithers_tt.integrations._langgraph_pauses import (
    Breakpoints,
    interrupt_values,
    paused_threads,
    waiting,
)
from smithers_tt.integrations._langgraph_serde import plain
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.timetravel import Change, Snapshot, json_diff

__all__ = [
    "LangGraphLens",
    "SuperStep",
    "channel_diff",
    "checkpoint_frames",
    "debug",
    "describe_frame",
    "lens",
    "paused_threads",
    "plain",
    "supersteps",
]


@dataclass(frozen=True)
class SuperStep:
    """One checkpoint of a thread, as LangGraph names its parts."""

    step: int
    """``metadata["step"]``: -1 for the input, then 0, 1, ... per super-step."""
    source: str
    """Why it was written: ``input``, ``loop``, ``update`` (``update_state``) or ``fork``."""
    checkpoint_id: str
    parent_id: str | None
    next: tuple[str, ...]
    """The nodes the next super-step runs (empty when the graph finished)."""
    tasks: tuple[str, ...]
    """The tasks of that next super-step that already have a result, an error or an interrupt."""
    interrupts: tuple[Any, ...]
    """The values of the interrupts waiting for an answer."""
    channels: tuple[str, ...]
    """The channels that hold a value."""
    frame_no: int | None
    """The frame of the thread's run that holds this checkpoint (None for another saver)."""
    config: dict[str, Any]
    """The config naming this checkpoint (for ``get_state``, ``update_state``, replay)."""


def checkpoint_frames(saver: SmithersSaver, thread_id: str, ns: str = "") -> dict[str, int]:
    """Checkpoint id -> the (newest) frame of the thread's run that holds it."""
    run_id = saver.run_id(thread_id, ns)
    out: dict[str, int] = {}
    for frame in saver.store.frames(run_id):
        if frame.kind == "checkpoint" and frame.codec == CHECKPOINT_CODEC:
            doc = payload(saver.store.read_content(frame.content_hash), CHECKPOINT_CODEC, "")
            out[str(doc["id"])] = frame.frame_no
    return out


def supersteps(app: Any, config: dict[str, Any]) -> list[SuperStep]:
    """The checkpoints of a thread (every branch), oldest first, as super-steps.

    Args:
        app: the compiled graph (its ``get_state_history`` is read).
        config: ``{"configurable": {"thread_id": ...}}``.
    """
    conf = config["configurable"]
    saver = getattr(app, "checkpointer", None)
    frames = (
        checkpoint_frames(saver, conf["thread_id"], conf.get("checkpoint_ns", ""))
        if isinstance(saver, SmithersSaver)
        else {}
    )
    out = []
    for state in reversed(list(app.get_state_history(config))):
        cid = state.config["configurable"]["checkpoint_id"]
        parent = (state.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        out.append(
            SuperStep(
                step=int(state.metadata.get("step", -1)),
                source=str(state.metadata.get("source", "")),
                checkpoint_id=cid,
                parent_id=parent,
                next=tuple(state.next),
                tasks=tuple(
                    t.name for t in state.tasks if t.result is not None or t.error or t.interrupts
                ),
                interrupts=tuple(i.value for i in state.interrupts),
                channels=tuple(sorted(state.values)),
                frame_no=frames.get(cid),
                config=state.config,
            )
        )
    return out


def channel_diff(app: Any, older: dict[str, Any], newer: dict[str, Any]) -> list[Change]:
    """What the channel values changed between two checkpoints, as JSON path changes."""
    before = plain(app.get_state(older).values)
    after = plain(app.get_state(newer).values)
    return json_diff(before, after)


def describe_frame(saver: SmithersSaver, run_id: str, frame_no: int) -> dict[str, Any] | None:
    """What a frame of a thread's run holds, in LangGraph's terms (None for a frame that holds
    no checkpoint): ``checkpoint_id``, ``parent_id``, ``step``, ``source``, ``channels`` (the
    decoded values of the state's channels, as JSON; LangGraph's own, such as ``branch:to:x``,
    are under ``internal``), ``versions`` (channel versions), ``writes`` (the pending
    writes of the tasks of the next super-step: task id, channel, value) and ``interrupts``
    (the values of the interrupts waiting for an answer)."""
    frames = saver.store.frames(run_id, after=frame_no - 1, upto=frame_no)
    if not frames or frames[0].kind != "checkpoint" or frames[0].codec != CHECKPOINT_CODEC:
        return None
    return _describe(saver, run_id, frames[0].content_hash)


def _describe(saver: SmithersSaver, run_id: str, content_hash: str) -> dict[str, Any]:
    """:func:`describe_frame` of the checkpoint document ``content_hash`` of run ``run_id``."""
    doc, _, found = checkpoint_tuple(saver, run_id, content_hash)
    if found is None:  # removed from LangGraph's view (delete_for_runs): the document only
        return {"checkpoint_id": doc["id"], "parent_id": doc.get("parent"), "removed": True}
    metadata = found.metadata or {}
    values = plain(found.checkpoint.get("channel_values") or {})
    writes = [
        {"task": task_id, "channel": channel, "value": plain(value)}
        for task_id, channel, value in found.pending_writes or []
    ]
    interrupts = interrupt_values(found)
    return {
        "checkpoint_id": doc["id"],
        "parent_id": doc.get("parent"),
        "step": metadata.get("step"),
        "source": metadata.get("source"),
        "channels": {k: v for k, v in values.items() if not _internal(k)},
        "internal": {k: v for k, v in values.items() if _internal(k)},
        "versions": dict(found.checkpoint.get("channel_versions") or {}),
        "writes": writes,
        "interrupts": interrupts,
    }


def _headline(shown: dict[str, Any]) -> str:
    """``super-step 1 (loop) · checkpoint 1ef2...``: what a checkpoint is, in one line."""
    cid = str(shown["checkpoint_id"])
    if shown.get("removed"):
        return f"checkpoint {cid} (deleted from LangGraph's view)"
    return f"super-step {shown['step']} ({shown['source']}) · checkpoint {cid}"


class LangGraphLens:
    """The debugger's lens (:class:`smithers_tt.widgets.FrameLens`, by duck typing) for the
    runs of a :class:`SmithersSaver`'s threads: node ``checkpoints`` is the thread's
    super-steps and ``values`` its channel values; a frame is titled with its super-step,
    source, channels, pending writes and interrupts; the inspector shows a checkpoint as
    :func:`describe_frame` does (channels decoded, not ``{"ref": hash}``); the diff of two
    frames compares their checkpoints' channels, writes and interrupts; the debugger's "open"
    menu lists the thread's subgraph namespaces (and, from one of them, the root graph);
    Fork… and Replay… give way to the config that branches the thread in LangGraph.

    Made by :func:`lens`; :func:`debug` opens the debugger on a thread with it.
    """

    NODES = {DOC_NODE: "super-steps", VALUE_NODE: "channel values"}

    def __init__(
        self, saver: SmithersSaver, breakpoints: Breakpoints | None = None, graph: Any = None
    ) -> None:
        self.saver = saver
        self.breakpoints = breakpoints or Breakpoints()
        self.graph = graph
        """The compiled graph, when given: the debugger's graph view draws it."""
        self._headlines: dict[tuple[str, str], str] = {}

    def _root_graph(self, run_id: str) -> Any:
        """The compiled graph, for a run of the thread's root namespace (a subgraph's own
        namespace is another graph), else None."""
        if self.graph is None:
            return None
        thread = self.saver.store.get_run(run_id).input or {}
        return None if thread.get("checkpoint_ns") else self.graph

    def workflow_graph(self, run_id: str) -> dict[str, Any] | None:
        """The compiled graph's nodes and edges (conditional ones marked), when it was given
        (:func:`~smithers_tt.integrations._langgraph_graph.graph_shape`)."""
        graph = self._root_graph(run_id)
        return None if graph is None else graph_shape(graph)

    def graph_state(self, snap: Snapshot) -> dict[str, Any] | None:
        """Each node of the compiled graph's state at the thread's checkpoint a snapshot
        shows, and the nodes that checkpoint's super-step ran (None without a graph; no
        states before the first checkpoint)."""
        graph = self._root_graph(snap.run_id)
        if graph is None:
            return None
        keys = [k for k in snap.refs if k[0] == DOC_NODE]
        if not keys:
            return {"states": {}, "current": []}
        return graph_state(self.saver, graph, snap.run_id, snap.refs[max(keys)].content_hash)

    def _is_doc(self, codec: str | None, node_id: str | None) -> bool:
        return codec == CHECKPOINT_CODEC and node_id == DOC_NODE

    def node_label(self, node_id: str, iteration: int) -> str | None:
        """``super-steps`` and ``channel values`` for the thread run's two nodes."""
        return self.NODES.get(node_id)

    def frame_title(self, frame: Frame) -> str | None:
        """The super-step a checkpoint frame holds, its channels, writes and interrupts; a
        value frame says it stored a channel value; other frames keep their description."""
        if frame.kind != "checkpoint" or frame.content_hash is None:
            return None
        if frame.codec == VALUE_CODEC:
            return f"channel value stored ({frame.content_hash[:12]})"
        if not self._is_doc(frame.codec, frame.node_id):
            return None
        shown = _describe(self.saver, frame.run_id, frame.content_hash)
        parts = [_headline(shown)]
        if "channels" in shown:
            parts.append("channels " + (", ".join(shown["channels"]) or "(none)"))
        if shown.get("writes"):
            parts.append(f"{len(shown['writes'])} pending write(s)")
        if shown.get("interrupts"):
            waiting = ", ".join(json.dumps(i, ensure_ascii=False)[:60] for i in shown["interrupts"])
            parts.append(f"interrupt waiting: {waiting}")
        return " · ".join(parts)

    def ref_label(self, ref: CheckpointRef) -> str | None:
        """A checkpoint by its super-step, a value by its address."""
        if ref.codec == VALUE_CODEC:
            return f"channel value · {ref.short_hash}"
        if not self._is_doc(ref.codec, ref.node_id):
            return None
        key = (ref.run_id, ref.content_hash)
        found = self._headlines.get(key)
        if found is None:  # a document never changes: its step, source and id neither
            found = _headline(_describe(self.saver, ref.run_id, ref.content_hash))
            self._headlines[key] = found
        return found

    def view(self, ref: CheckpointRef) -> Any:
        """A checkpoint as :func:`describe_frame` says it; a channel value decoded."""
        if ref.codec == VALUE_CODEC:
            data = self.saver.store.read_content(ref.content_hash)
            value = payload(data, VALUE_CODEC, ref.content_hash)
            return plain(self.saver._decode(value, f"channel value {ref.short_hash}"))
        if not self._is_doc(ref.codec, ref.node_id):
            return None
        return _describe(self.saver, ref.run_id, ref.content_hash)

    def diff(self, a: Snapshot, b: Snapshot) -> list[tuple[str, list[Change]]] | None:
        """What the channels (then the super-step, writes and interrupts) changed from the
        checkpoint of frame ``a`` to that of frame ``b``."""
        old, new = (self._newest(snap) for snap in (a, b))
        heads = ("step", "source", "checkpoint_id")
        return [
            ("channels", json_diff(old.get("channels", {}), new.get("channels", {}))),
            (
                "super-step",
                json_diff({k: old.get(k) for k in heads}, {k: new.get(k) for k in heads}),
            ),
            ("writes", json_diff(old.get("writes", []), new.get("writes", []))),
            ("interrupts", json_diff(old.get("interrupts", []), new.get("interrupts", []))),
        ]

    def related(self, run_id: str) -> list[tuple[str, str]]:
        """The runs of the thread's other namespaces (a subgraph's checkpoints live in a
        namespace of their own, ``parent_node:task_id``), the root graph's first."""
        thread = self.saver.store.get_run(run_id).input or {}
        if "thread_id" not in thread:
            return []
        here = str(thread.get("checkpoint_ns", ""))
        spaces = {
            str(t.config["configurable"].get("checkpoint_ns", ""))
            for t in self.saver.list({"configurable": {"thread_id": thread["thread_id"]}})
        }
        return [
            (
                f"subgraph {ns}" if ns else "root graph",
                self.saver.run_id(str(thread["thread_id"]), ns),
            )
            for ns in sorted(spaces - {here})
        ]

    def fork_note(self, snap: Snapshot) -> str:
        """A thread branches in LangGraph (a smithers_tt fork would be a run no saver reads
        as a thread): the config to invoke the graph with from the snapshot's checkpoint."""
        thread = self.saver.store.get_run(snap.run_id).input or {}
        checkpoint_id = self._newest(snap).get("checkpoint_id")
        if checkpoint_id is None:
            return (
                "A LangGraph thread branches in LangGraph, from a checkpoint: this frame "
                "comes before the thread's first one. Rewind… works here."
            )
        config = {
            "configurable": {
                "thread_id": thread.get("thread_id"),
                "checkpoint_ns": thread.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint_id,
            }
        }
        return (
            "A LangGraph thread branches in LangGraph: to go on from this frame's checkpoint, "
            f"invoke the graph with the config {json.dumps(config, ensure_ascii=False)} "
            "(or graph.update_state with it, to change a value first). LangGraph writes the "
            "branch into the same thread. Rewind… works here."
        )

    def pause(self, run_id: str) -> dict[str, Any] | None:
        """What the thread's newest checkpoint waits on, for the debugger's Paused banner:
        the values of its ``interrupt(value)`` calls, or the nodes a static breakpoint
        stopped it before or after (see :mod:`~smithers_tt.integrations._langgraph_pauses`);
        None when it waits on nothing."""
        return waiting(self.saver, self.saver.store.get_run(run_id), self.breakpoints)

    def _newest(self, snap: Snapshot) -> dict[str, Any]:
        """:func:`describe_frame` of the thread's checkpoint at a snapshot ({} before any)."""
        keys = [k for k in snap.refs if k[0] == DOC_NODE]
        if not keys:
            return {}
        return _describe(self.saver, snap.run_id, snap.refs[max(keys)].content_hash)


def lens(
    saver: SmithersSaver,
    graph: Any = None,
    *,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
) -> LangGraphLens:
    """The debugger's lens for the runs of ``saver``'s threads:
    ``db.debug(saver.run_id(thread_id), lens=lens(saver))``.

    ``graph`` (the compiled graph: its ``interrupt_before`` / ``interrupt_after``) and the
    breakpoints given to ``invoke`` make a thread stopped between super-steps a pause only
    at those nodes; without any, every such stop shows as one (see :func:`debug`). The
    debugger's graph view draws ``graph`` (its nodes and edges, each node coloured by its
    state at the selected frame's checkpoint), when given."""
    return LangGraphLens(saver, Breakpoints(graph, interrupt_before, interrupt_after), graph)


def debug(
    saver: SmithersSaver,
    thread_id: str,
    checkpoint_ns: str = "",
    *,
    graph: Any = None,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
    **kw: Any,
) -> Any:
    """The notebook debugger of a thread, read as LangGraph (super-steps, channels, writes,
    interrupts, static breakpoints: ``graph`` and the breakpoints as for :func:`lens`);
    ``kw`` as for ``db.debug`` (needs the ``notebook`` extra)."""
    view = lens(saver, graph, interrupt_before=interrupt_before, interrupt_after=interrupt_after)
    return saver.db.debug(saver.run_id(thread_id, checkpoint_ns), lens=view, **kw)


def _internal(channel: str) -> bool:
    """Whether a channel is LangGraph's bookkeeping rather than a key of the state."""
    return channel.startswith(("branch:", "__")) or ":" in channel
