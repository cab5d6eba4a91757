"""The ledger's changes for the LangGraph saver's runs (see :mod:`._ledger`).

A LangGraph thread's run is created by one :func:`~smithers_tt.store.ledger._write.write` of an
:class:`~smithers_tt.store.ledger._write.Entry` with ``create`` set: :class:`ThreadCreated`
(frame 0, which also maps the run to its thread in ``tt_lg_threads``) and one
:class:`NodeOpened` per node (frames 1 and 2, the attempts the saver's frames belong to),
followed by the changes of the write that found the thread missing.

Every later transaction of the saver is one write of the run's entry: :class:`Incarnation`
(no frame: it reads the run's incarnation from the clock's advance, and refuses a write
meant for an earlier one), a :class:`ValuePinned` per value the run uses for the first
time, then a :class:`DocumentPut` (a checkpoint), a :class:`WritesPut` (its pending writes)
or the :class:`FrameCopied` frames and :class:`IndexCopied` rows of a copied thread.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.store._records import Fence, Frame
from smithers_tt.store.backend import AGENT, LANGGRAPH_DOC_NODE, LANGGRAPH_VALUE_NODE
from smithers_tt.store.ledger._content import Stored
from smithers_tt.store.ledger._langgraph_calls import steps_after
from smithers_tt.store.ledger._node_changes import AttemptStarted
from smithers_tt.store.ledger._write import Change, Note, RunRow, Write


class ThreadReplaced(Exception):  # a condition the saver handles, not a fault
    """The thread's run is another incarnation than the one the caller's cache was made for
    (the thread was deleted and created again): nothing was written."""


class ThreadCreated(Note):
    """The run of a LangGraph thread is created; ``tt_lg_threads`` maps it to the thread."""

    __slots__ = ("checkpoint_ns", "thread_id")

    def __init__(self, run_id: str, thread_id: str, checkpoint_ns: str, data: dict) -> None:
        super().__init__(run_id, "run_created", state="running", data=data)
        self.thread_id, self.checkpoint_ns = thread_id, checkpoint_ns

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        # The thread row hangs under the run row, which the ledger inserted first.
        params = (self.run_id, self.thread_id, self.checkpoint_ns, w.stamp)
        w.db.count(w.sql.insert_lg_thread, params)
        return super().apply(w, frame_no, early)


class NodeOpened(AttemptStarted):
    """A node of a thread's run opens its one attempt, whose frames are the saver's."""

    __slots__ = ("agent_id",)

    def __init__(self, run_id: str, node_id: str, agent_id: str) -> None:
        super().__init__(Fence(run_id, 1), node_id, 0)
        self.agent_id = agent_id

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        frame = super().apply(w, frame_no, early)
        return dataclasses.replace(frame, agent_id=self.agent_id)


class Incarnation(Change):
    """No frame: reads the run's incarnation (``created_at_ms``) as the clock's advance
    returns it into :attr:`token`; with ``expect`` set, any other raises
    :class:`ThreadReplaced` before anything is written."""

    __slots__ = ("epoch", "expect", "token")

    ticks = 0
    keeps_run = True

    def __init__(self, expect: int | None) -> None:
        self.expect = expect
        self.token: int | None = None
        self.epoch: int | None = None
        """The run's owner epoch (what its pins are known by, with :attr:`token`)."""

    def check(self, run: RunRow) -> None:
        self.token, self.epoch = run[5], run[1]
        if self.expect is not None and self.token != self.expect:
            raise ThreadReplaced("the thread was deleted and created again")

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        return None


def _checkpoint_frame(
    run_id: str, frame_no: int, node_id: str, enc: EncodedCheckpoint, data: Any, stamp: int
) -> Frame:
    """A frame of the saver's (a checkpoint frame in the node's one attempt)."""
    return Frame(
        run_id, frame_no, "checkpoint", node_id, 0, 1, frame_no, None, enc.content_hash,
        enc.codec, enc.version, "progress", AGENT, data, stamp,
    )  # fmt: skip


class ValuePinned(Stored):
    """A value the run uses for the first time is stored, and pinned by a value frame."""

    __slots__ = ("enc", "run_id")

    def __init__(self, run_id: str, blob: EncodedCheckpoint) -> None:
        self.run_id, self.enc = run_id, blob

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        enc = self.enc
        self.store(w, early)
        size = {"size": enc.size}
        return _checkpoint_frame(self.run_id, frame_no, LANGGRAPH_VALUE_NODE, enc, size, w.stamp)


class DocumentPut(Stored):
    """A checkpoint's document is stored in a document frame, which its index row names,
    with the nodes its pending sends go to (``sends``); the model calls waiting for it are
    shown (see :mod:`._langgraph_calls`): those of its parent's tasks, numbered with its
    frame, and a ``Send`` task's of its own, named."""

    __slots__ = ("checkpoint_id", "enc", "parent", "run_id", "sends")

    def __init__(
        self,
        run_id: str,
        checkpoint_id: str,
        document: EncodedCheckpoint,
        parent: str | None = None,
        sends: Sequence[str] = (),
    ) -> None:
        self.run_id, self.checkpoint_id, self.enc = run_id, checkpoint_id, document
        self.parent, self.sends = parent, tuple(sends)

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        self.store(w, early)
        run_id, sends = self.run_id, self.sends
        listed = json.dumps(sends, ensure_ascii=False, separators=(",", ":")) if sends else None
        w.defer(w.sql.upsert_lg_index, (run_id, self.checkpoint_id, frame_no, listed))
        steps_after(w, run_id, self.checkpoint_id, self.parent, sends, frame_no)
        return _checkpoint_frame(run_id, frame_no, LANGGRAPH_DOC_NODE, self.enc, None, w.stamp)


class WritesPut(Change):
    """No frame: a checkpoint's pending writes become ``merge(the stored ones or None)``.

    They are read with the clock's advance, which has locked the run row: the
    read-modify-write is exclusive among the run's writers."""

    __slots__ = ("checkpoint_id", "merge", "run_id")

    ticks = 0

    def __init__(self, run_id: str, checkpoint_id: str, merge: Callable[[str | None], str]):
        self.run_id, self.checkpoint_id, self.merge = run_id, checkpoint_id, merge

    keeps_run = True

    def early(self, w: Write) -> tuple[str, Any]:
        return (w.sql.lg_writes, (self.run_id, self.checkpoint_id))

    def guess(self, w: Write) -> tuple[tuple[str, Any], Any] | bool | None:
        # The writes this engine last stored for the run's checkpoint, or (a checkpoint it
        # has not written to: LangGraph's next step) none stored yet.
        known = w.db.known()
        last = None if known is None else known.get(("lg_writes", self.run_id))
        key = (self.run_id, self.checkpoint_id)
        if last is not None and last[0] == self.checkpoint_id:
            return (w.sql.lg_writes_are, (*key, last[1])), (last[1],)
        return (w.sql.lg_writes_none, key), None

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        text = self.merge(early[0] if early is not None else None)
        w.defer(w.sql.upsert_lg_writes, (self.run_id, self.checkpoint_id, text))
        w.db.learn(("lg_writes", self.run_id), (self.checkpoint_id, text))


class FrameCopied(Change):
    """A checkpoint frame of another run, copied (its content shared) into this one;
    ``renumber`` learns its new number."""

    __slots__ = ("renumber", "row", "run_id", "source")

    def __init__(self, run_id: str, source: str, row: Any, renumber: dict[int, int]) -> None:
        self.run_id, self.source, self.row, self.renumber = run_id, source, row, renumber

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        row = self.row
        self.renumber[row.frame_no] = frame_no
        return Frame(
            self.run_id, frame_no, "checkpoint", row.node_id, row.iteration, row.attempt,
            frame_no, None, row.content_hash, row.codec, row.version, row.purpose,
            row.agent_id, {"copied_from": [self.source, row.frame_no]}, w.stamp,
        )  # fmt: skip


class IndexCopied(Change):
    """No frame: another run's index rows, copied with their writes, pointing at the frames
    :class:`FrameCopied` numbered (``renumber``; applied after them)."""

    __slots__ = ("renumber", "rows", "run_id")

    ticks = 0

    def __init__(self, run_id: str, rows: Sequence[Any], renumber: dict[int, int]) -> None:
        self.run_id, self.rows, self.renumber = run_id, rows, renumber

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        for row in self.rows:
            no = self.renumber.get(row.frame_no)
            child = self.renumber.get(row.child_frame_no)
            w.defer(
                w.sql.copy_lg_index,
                (self.run_id, row.checkpoint_id, no, row.writes_json, child, row.sends_json),
            )
