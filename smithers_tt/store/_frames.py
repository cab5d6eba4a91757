"""Frames: the numbered, committed state changes of a run, stamped by its logical clock.

Every state change of a run (run created, claimed, finished; attempt started and ended;
checkpoint published; node state and output) advances the run's ``clock`` in the same
transaction and records one frame whose ``frame_no`` is that clock; all of them are written
by the ledger (:mod:`smithers_tt.store.ledger._write`), which also serialises the run's writers, so
frame numbers are dense and follow commit order; wall-clock times are never compared.

A frame carries what changed (and, for checkpoints, the whole ref, pinning its content by
hash), so the state visible at any frame can be rebuilt from the frames up to it: snapshots
cost storage in proportion to what changed, not to the size of the run.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.store._records import FRAME_DATA_WRAPPING, Frame, stored_json
from smithers_tt.store.backend import schema as S

__all__ = [
    "FRAME_COLUMNS",
    "FRAME_DATA_WRAPPING",
    "PAUSE_KINDS",
    "Frame",
    "checkpoint_frame",
    "frame_data",
    "frame_fields",
    "frame_from_row",
    "frame_row",
    "frame_values",
    "select_frames",
]


FRAME_COLUMNS = (
    "run_id",
    "frame_no",
    "kind",
    "node_id",
    "iteration",
    "attempt",
    "sequence",
    "state",
    "content_hash",
    "codec",
    "version",
    "purpose",
    "agent_id",
    "data_json",
    "created_at_ms",
    "size_bytes",
)
# Statements.insert_frame names these columns literally; the schema is defined once, in _schema.
if tuple(S.frames.c.keys()) != FRAME_COLUMNS:
    raise RuntimeError("smithers_tt.store._frames is out of step with _schema; fix the SQL")


def frame_values(frame: Frame) -> tuple[Any, ...]:
    """A frame's column values in ``tt_frames`` order.

    A checkpoint frame's ``data["size"]`` (an integer) goes to ``size_bytes``; when that is
    all the data holds, ``data_json`` stays NULL (:func:`frame_data` reads it back)."""
    data, size = frame.data, None
    if frame.kind == "checkpoint" and type(data) is dict:
        size = data.get("size")
        if type(size) is not int:
            size = None
        elif len(data) == 1:
            data = None
    return (
        frame.run_id,
        frame.frame_no,
        frame.kind,
        frame.node_id,
        frame.iteration,
        frame.attempt,
        frame.sequence,
        frame.state,
        frame.content_hash,
        frame.codec,
        frame.version,
        frame.purpose,
        frame.agent_id,
        None if data is None else canonical_bytes(data, wrapping=FRAME_DATA_WRAPPING).decode(),
        frame.created_at_ms,
        size,
    )


def frame_data(kind: str, data: Any, size_bytes: int | None) -> Any:
    """A frame's ``data`` from its (parsed) ``data_json`` and ``size_bytes`` columns: the
    inverse of :func:`frame_values`."""
    if data is None and size_bytes is not None and kind == "checkpoint":
        return {"size": size_bytes}
    return data


PAUSE_KINDS = ("run_created", "forked", "run_paused", "run_continued", "breakpoints_set")
"""The frame kinds that say where a run paused, how it went on, and its breakpoints."""


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
