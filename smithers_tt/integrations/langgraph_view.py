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

from dataclasses import dataclass
from typing import Any

from smithers_tt.checkpoint import validate
from smithers_tt.errors import CheckpointInvalid
from smithers_tt.integrations.langgraph import CHECKPOINT_CODEC, SmithersSaver, _payload
from smithers_tt.timetravel import Change, json_diff

__all__ = [
    "SuperStep",
    "channel_diff",
    "checkpoint_frames",
    "describe_frame",
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


def plain(value: Any) -> Any:
    """A channel value as JSON (objects such as LangChain messages by their fields, anything
    else by its ``repr``), for diffs and display."""
    try:
        validate(value)
        return value
    except CheckpointInvalid:
        pass
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain(dump())
    return repr(value)


def checkpoint_frames(saver: SmithersSaver, thread_id: str, ns: str = "") -> dict[str, int]:
    """Checkpoint id -> the (newest) frame of the thread's run that holds it."""
    run_id = saver.run_id(thread_id, ns)
    out: dict[str, int] = {}
    for frame in saver.store.frames(run_id):
        if frame.kind == "checkpoint" and frame.codec == CHECKPOINT_CODEC:
            doc = _payload(saver.store.read_content(frame.content_hash), CHECKPOINT_CODEC, "")
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
    doc = _payload(saver.store.read_content(frames[0].content_hash), CHECKPOINT_CODEC, "")
    thread = saver.store.get_run(run_id).input or {}
    config = {"configurable": {**thread, "checkpoint_id": doc["id"]}}
    found = saver.get_tuple(config)
    if found is None:  # removed from LangGraph's view (delete_for_runs): the document only
        return {"checkpoint_id": doc["id"], "parent_id": doc.get("parent"), "removed": True}
    metadata = found.metadata or {}
    values = plain(found.checkpoint.get("channel_values") or {})
    writes = [
        {"task": task_id, "channel": channel, "value": plain(value)}
        for task_id, channel, value in found.pending_writes or []
    ]
    interrupts = [
        plain(getattr(item, "value", item))
        for w in found.pending_writes or []
        if w[1] == "__interrupt__"
        for item in (w[2] if isinstance(w[2], list | tuple) else [w[2]])
    ]
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


def _internal(channel: str) -> bool:
    """Whether a channel is LangGraph's bookkeeping rather than a key of the state."""
    return channel.startswith(("branch:", "__")) or ":" in channel
