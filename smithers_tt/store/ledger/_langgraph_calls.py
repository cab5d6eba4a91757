"""The model calls of a LangGraph thread: each once, under the node that made it, numbered
with the checkpoint its step made, whatever order LangGraph's background saves arrive in.

The saver reads calls from the AI messages a task writes (``LangGraphCalls``). A message is
written again by tasks that did not get it from a model (a node returning the whole message
list, a subgraph's node returning the subgraph's state), so a call's id is its thread's and
message's (:func:`lg_call_id`, the same in every namespace of the thread) and its row is
inserted unless there, and replaced by a task of lesser rank (``lg_key``: the input
checkpoints from the thread's root namespace down to the task's, deeper first on a tie, then
the task id): the earliest task to write the message, inside a subgraph before the parent node
returning its state, which is the one that got it from the model.

LangGraph stores a step's checkpoint and its tasks' writes in the background, in either order.
Both sides are ledger writes of the thread's run, so each sees what the other committed: a
task's calls are numbered with the frame of the first checkpoint stored with the task's input
checkpoint as its parent (``child_frame_no``), and wait for it hidden, as a rewound call is
(``rewind_id`` :func:`pending_mark`, ``frame_no`` -1), when it is not stored yet; that
checkpoint's :class:`~._langgraph.DocumentPut` shows them (:func:`steps_after`). A ``Send``
task's path names the index of its send, not its node: the input checkpoint's ``sends_json``
names it, or its ``DocumentPut`` does when it comes after.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from smithers_tt._model_calls import ModelCall
from smithers_tt.store._records import AttemptKey
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._calls import EncodedCall, call_row, contents_of, encode_call
from smithers_tt.store.ledger._write import Change, Step, Write

PENDING_FRAME = S.PENDING_CALL_FRAME
"""``frame_no`` of a call waiting for its step's checkpoint (hidden by its ``rewind_id``)."""

UNKNOWN_NODE = "langgraph"
"""The node of a ``Send`` task whose input checkpoint names no such send."""


def lg_call_id(thread_id: str, message_id: str) -> str:
    """The id of the call an AI message of a thread shows (40 characters)."""
    digest = hashlib.sha256(f"{thread_id}\0{message_id}".encode()).hexdigest()
    return f"lg{digest[:38]}"


def pending_mark(checkpoint_id: str) -> str:
    """The ``rewind_id`` of the calls of tasks run from ``checkpoint_id`` waiting for the
    checkpoint their step makes (no rewind's id has this form)."""
    mark = f"{S.PENDING_CALL_MARK}{checkpoint_id}"
    if len(mark) <= 200:
        return mark
    return f"{S.PENDING_CALL_MARK}#{hashlib.sha256(mark.encode()).hexdigest()}"


def send_placeholder(index: int) -> str:
    """The node of a ``Send`` task's waiting call until its input checkpoint names it."""
    return f"~send {index}"


@dataclass(frozen=True, slots=True)
class LangGraphCalls:
    """The model calls one task's writes show: ``node`` is the task's node, or (an int) the
    index of the send it ran among its input checkpoint's; ``rank`` orders the tasks writing
    the same message (least: the one that made the call); ``calls`` are ``(message id,
    call)``."""

    thread_id: str
    checkpoint_id: str
    node: str | int
    rank: str
    calls: Sequence[tuple[str, ModelCall]]


def lg_call_changes(run_id: str, found: LangGraphCalls) -> list[Change]:
    """The frameless changes that record ``found`` in the thread's run ``run_id``."""
    if not found.calls:
        return []
    encoded = [(message_id, encode_call(call)) for message_id, call in found.calls]
    recorded = LangGraphCallsRecorded(run_id, found, encoded)
    return [*contents_of([c for _, c in encoded]), recorded]


class LangGraphCallsRecorded(Change):
    """No frame: a task's calls, numbered with its step's checkpoint if stored (else
    waiting for it), each inserted unless a task of lesser rank wrote its message."""

    __slots__ = ("encoded", "found", "run_id")

    ticks = 0
    executes = False
    keeps_run = True

    def __init__(
        self, run_id: str, found: LangGraphCalls, encoded: Sequence[tuple[str, EncodedCall]]
    ) -> None:
        self.run_id, self.found, self.encoded = run_id, found, encoded

    def early(self, w: Write) -> Step | None:
        return (w.sql.lg_step, (self.run_id, self.found.checkpoint_id))

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        found = self.found
        stored, child, sends_json = early if early is not None else (None, None, None)
        node = found.node
        if isinstance(node, int):
            sends = json.loads(sends_json) if sends_json else []
            if 0 <= node < len(sends):
                node = str(sends[node])
            else:  # named when the checkpoint comes; it came without this send: unknown
                node = send_placeholder(node) if stored is None else UNKNOWN_NODE
        key = AttemptKey(self.run_id, node, 0, 1)
        mark = None if child is not None else pending_mark(found.checkpoint_id)
        frame = child if child is not None else PENDING_FRAME
        for position, (message_id, encoded) in enumerate(self.encoded):
            call_id = lg_call_id(found.thread_id, message_id)
            row = (*call_row(call_id, key, frame, position, encoded, mark), found.rank)
            w.defer(w.sql.upsert_lg_call, row)


def steps_after(
    w: Write,
    run_id: str,
    checkpoint_id: str,
    parent: str | None,
    sends: Sequence[str],
    frame_no: int,
) -> None:
    """What storing checkpoint ``checkpoint_id`` (of ``parent``, with ``sends``) in frame
    ``frame_no`` does to the calls waiting for it: its ``Send`` tasks' are named, and its
    parent's tasks' are numbered with it (the first child of the parent only)."""
    mark = pending_mark(checkpoint_id)
    for index, node in enumerate(sends):
        w.defer(w.sql.name_lg_send, (node, run_id, mark, send_placeholder(index)))
    if parent is not None:
        w.defer(w.sql.set_lg_child, (frame_no, run_id, parent))
        w.defer(w.sql.show_lg_calls, (frame_no, run_id, pending_mark(parent)))
