"""The ledger's changes for the LangGraph saver's runs (see :mod:`._ledger`).

A LangGraph thread's run is created by one :func:`~smithers_tt.store._ledger.write` of an
:class:`~smithers_tt.store._ledger.Entry` with ``create`` set: :class:`ThreadCreated`
(frame 0, which also maps the run to its thread in ``tt_lg_threads``) and one
:class:`NodeOpened` per node (frames 1 and 2, the attempts the saver's frames belong to).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from smithers_tt.store._ledger import AttemptStarted, Note, Write
from smithers_tt.store._records import Fence, Frame


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
