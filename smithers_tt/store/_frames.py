"""Frames: the numbered, committed state changes of a run, stamped by its logical clock.

Every state change of a run (run created, claimed, finished; attempt started and ended;
checkpoint published; node state and output) advances the run's ``clock`` in the same
transaction and records one frame whose ``frame_no`` is that clock. The clock is advanced by
an ``UPDATE`` of the run row, which also serialises the run's writers, so frame numbers are
dense and follow commit order; wall-clock times are never compared.

A frame carries what changed (and, for checkpoints, the whole ref, pinning its content by
hash), so the state visible at any frame can be rebuilt from the frames up to it: snapshots
cost storage in proportion to what changed, not to the size of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint._json import canonical_bytes
from smithers_tt.errors import FenceLost, RunNotFound
from smithers_tt.store import _schema as S
from smithers_tt.store._records import CheckpointRef, Fence, now_ms, stored_json

FRAME_DATA_WRAPPING = 2
"""Levels of a frame's ``data`` that wrap the values it records (``{"output": {task:
output}}``): they do not count against the nesting bound of those values."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One committed state change of a run."""

    run_id: str
    frame_no: int
    kind: str
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    sequence: int | None = None
    state: str | None = None
    content_hash: str | None = None
    codec: str | None = None
    version: int | None = None
    purpose: str | None = None
    agent_id: str | None = None
    data: Any = None
    created_at_ms: int = 0

    def checkpoint_ref(self) -> CheckpointRef:
        """The checkpoint ref a ``checkpoint`` frame records: what its content is loaded by."""
        return CheckpointRef(
            self.run_id,
            self.node_id or "",
            self.iteration or 0,
            self.attempt or 0,
            self.sequence or 0,
            self.content_hash or "",
            self.codec or "",
            self.version or 0,
            self.purpose or "",
            self.agent_id,
            self.created_at_ms,
        )


def advance_clock(conn: Connection, run_id: str, fence: Fence | None = None) -> Any:
    """Advance the run's clock by one and return the run row (with the new ``clock``).

    With a ``fence``, raise :class:`FenceLost` unless it owns the running run; the caller's
    transaction (or savepoint) then rolls the increment back, so nothing is written.
    """
    r = S.runs
    row = conn.execute(
        r.update()
        .where(r.c.run_id == run_id)
        .values(clock=r.c.clock + 1, updated_at_ms=now_ms())
        .returning(
            r.c.status, r.c.owner_epoch, r.c.clock, r.c.max_checkpoint_bytes, r.c.cancel_requested
        )
    ).one_or_none()
    if row is None:
        raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
    if fence is not None and (row.status != "running" or row.owner_epoch != fence.epoch):
        raise FenceLost(
            f"run {run_id} is {row.status} under epoch {row.owner_epoch}; epoch "
            f"{fence.epoch} lost ownership and wrote nothing",
            run_id=run_id,
            epoch=fence.epoch,
        )
    return row


def record(conn: Connection, run_id: str, fence: Fence | None, kind: str, **fields: Any) -> Frame:
    """Advance the clock (checking ``fence`` if given) and insert the frame of one change."""
    row = advance_clock(conn, run_id, fence)
    return insert_frame(conn, Frame(run_id, row.clock, kind, created_at_ms=now_ms(), **fields))


def insert_frame(conn: Connection, frame: Frame) -> Frame:
    """Insert a frame whose number the caller allocated."""
    conn.execute(S.frames.insert().values(**frame_row(frame)))
    return frame


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
    return {
        "run_id": frame.run_id,
        "frame_no": frame.frame_no,
        "kind": frame.kind,
        "node_id": frame.node_id,
        "iteration": frame.iteration,
        "attempt": frame.attempt,
        "sequence": frame.sequence,
        "state": frame.state,
        "content_hash": frame.content_hash,
        "codec": frame.codec,
        "version": frame.version,
        "purpose": frame.purpose,
        "agent_id": frame.agent_id,
        "data_json": None
        if frame.data is None
        else canonical_bytes(frame.data, wrapping=FRAME_DATA_WRAPPING).decode(),
        "created_at_ms": frame.created_at_ms,
    }


def frame_from_row(row: Any) -> Frame:
    """Build a :class:`Frame` from a row of ``tt_frames`` (all its columns, in schema order).

    Positional: a run of 10,000 frames is read in a fraction of the time that named access
    to each column takes, which is what lets the debugger open such a run in under a second.
    """
    t = tuple(row)
    data = t[13]
    if data is not None:
        data = stored_json(data, lambda: f"tt_frames.data_json of frame {t[1]} of run {t[0]!r}")
    return Frame(*t[:13], data, t[14])


def select_frames(run_id: str, after: int | None = None, upto: int | None = None) -> sa.Select:
    """Frames of a run in order, optionally ``after < frame_no <= upto``."""
    f = S.frames
    stmt = sa.select(f).where(f.c.run_id == run_id).order_by(f.c.frame_no)
    if after is not None:
        stmt = stmt.where(f.c.frame_no > after)
    if upto is not None:
        stmt = stmt.where(f.c.frame_no <= upto)
    return stmt
