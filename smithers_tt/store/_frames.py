"""Frames: the numbered, committed state changes of a run, stamped by its logical clock.

Every state change of a run (run created, claimed, finished; attempt started and ended;
checkpoint published; node state and output) advances the run's ``clock`` in the same
transaction and records one frame whose ``frame_no`` is that clock; all of them are written
by the ledger (:mod:`smithers_tt.store._ledger`), which also serialises the run's writers, so
frame numbers are dense and follow commit order; wall-clock times are never compared.

A frame carries what changed (and, for checkpoints, the whole ref, pinning its content by
hash), so the state visible at any frame can be rebuilt from the frames up to it: snapshots
cost storage in proportion to what changed, not to the size of the run.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from smithers_tt.store import _schema as S
from smithers_tt.store._ledger import FRAME_COLUMNS, frame_data, frame_values
from smithers_tt.store._records import FRAME_DATA_WRAPPING, Frame, stored_json

__all__ = [
    "FRAME_DATA_WRAPPING",
    "Frame",
    "checkpoint_frame",
    "frame_fields",
    "frame_from_row",
    "frame_row",
    "select_frames",
]


def checkpoint_frame(
    ref: Any, run_id: str, frame_no: int, data: Any, created_at_ms: int | None = None
) -> Frame:
    """The ``checkpoint`` frame of a ref (which pins its content by hash)."""
    return Frame(
        run_id,
        frame_no,
        "checkpoint",
        ref.node_id,
        ref.iteration,
        ref.attempt,
        ref.sequence,
        None,
        ref.content_hash,
        ref.codec,
        ref.version,
        ref.purpose,
        ref.agent_id,
        data,
        ref.created_at_ms if created_at_ms is None else created_at_ms,
    )


def frame_row(frame: Frame) -> dict[str, Any]:
    """The column values of a frame."""
    return dict(zip(FRAME_COLUMNS, frame_values(frame), strict=True))


def frame_from_row(row: Any) -> Frame:
    """Build a :class:`Frame` from a row of ``tt_frames`` (all its columns, in schema order).

    Positional: a run of 10,000 frames is read in a fraction of the time that named access
    to each column takes, which is what lets the debugger open such a run in under a second.
    """
    return Frame(*frame_fields(tuple(row)))


def frame_fields(t: tuple[Any, ...]) -> tuple[Any, ...]:
    """The values of :class:`Frame`'s fields, in its order, from a row of ``tt_frames`` as a
    tuple (``data_json`` parsed, ``size_bytes`` folded into ``data``)."""
    data = t[13]
    if data is not None:
        data = stored_json(data, lambda: f"tt_frames.data_json of frame {t[1]} of run {t[0]!r}")
    return (*t[:13], frame_data(t[2], data, t[15]), t[14])


def select_frames(run_id: str, after: int | None = None, upto: int | None = None) -> sa.Select:
    """Frames of a run in order, optionally ``after < frame_no <= upto``."""
    f = S.frames
    stmt = sa.select(f).where(f.c.run_id == run_id).order_by(f.c.frame_no)
    if after is not None:
        stmt = stmt.where(f.c.frame_no > after)
    if upto is not None:
        stmt = stmt.where(f.c.frame_no <= upto)
    return stmt
