"""Frames read in bulk as light rows: a run's whole history for the debugger to open.

:meth:`Store.frames` makes a frozen :class:`Frame` per frame; for 100,000 frames that is a
quarter of a second before anything is shown. :func:`frame_rows` reads the same columns,
in the same order, into :class:`FrameRow` named tuples (a tenth of the cost to make, and
their fields are read as fast): equal, field by field, to the frames ``Store.frames`` gives,
and :meth:`FrameRow.frame` makes the :class:`Frame` of one of them when it is shown.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from smithers_tt.store._frames import frame_fields, select_frames
from smithers_tt.store._records import CheckpointRef, Frame
from smithers_tt.store.backend import Engine

__all__ = ["FrameRow", "frame_rows"]


class FrameRow(NamedTuple):
    """One frame as a named tuple: the fields of :class:`Frame`, in its order."""

    run_id: str
    frame_no: int
    kind: str
    node_id: str | None
    iteration: int | None
    attempt: int | None
    sequence: int | None
    state: str | None
    content_hash: str | None
    codec: str | None
    version: int | None
    purpose: str | None
    agent_id: str | None
    data: Any
    created_at_ms: int

    def frame(self) -> Frame:
        """This frame as a :class:`Frame`."""
        return Frame(*self)

    def checkpoint_ref(self) -> CheckpointRef:
        """The checkpoint ref a ``checkpoint`` frame records (see :meth:`Frame.checkpoint_ref`)."""
        return self.frame().checkpoint_ref()


def frame_rows(
    engine: Engine, run_id: str, *, after: int | None = None, upto: int | None = None
) -> list[FrameRow]:
    """The frames of a run in order as :class:`FrameRow` (optionally only
    ``after < frame_no <= upto``), read in one transaction: what :meth:`Store.frames` reads.

    Raises:
        StoreCorrupt: a frame's data is not JSON.
    """
    make = FrameRow._make
    stmt = select_frames(run_id, after, upto)
    return engine.transaction(
        lambda conn: [make(frame_fields(r)) for r in conn.execute(stmt).fetchall()], write=False
    )
